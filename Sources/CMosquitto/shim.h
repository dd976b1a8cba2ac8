// libmosquitto (Debian's libmosquitto-dev): the MQTT client behind lensmetadata location=mqtt://.
// No shim target: the calls StreamLens makes are plain functions (no macros, no variadics).
#include <mosquitto.h>
