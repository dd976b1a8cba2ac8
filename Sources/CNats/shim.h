// libnats (Debian's libnats-dev): the NATS client behind lensmetadata location=nats:// (JetStream
// publishes and their acknowledgements). No shim target: the calls StreamLens makes are plain
// functions and structs.
#include <nats/nats.h>
