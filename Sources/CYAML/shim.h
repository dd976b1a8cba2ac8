// libyaml (Debian's libyaml-dev): the YAML parser behind `serve --config`. No shim target: its
// document API is plain functions and structs. Only StreamLensConfig/YAMLDocument.swift uses it.
#include <yaml.h>
