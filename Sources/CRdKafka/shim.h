// librdkafka (Debian's librdkafka-dev): the Kafka producer behind lensmetadata location=kafka://,
// and its mock cluster (rdkafka_mock.h) the tests run brokers on. No shim target: the calls
// StreamLens makes are plain functions (rd_kafka_produce, not the variadic rd_kafka_producev).
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
