"""The buses' own clients, for the Kafka and NATS tests (run with .deps/bus-venv/bin/python):
what lensmetadata sent is read back with confluent-kafka and nats-py, not with our code.

  bus_client.py nats-stream PORT NAME SUBJECT...   make a JetStream stream (the operator's part)
  bus_client.py nats-read PORT FILTER              every stored message: one JSON line each,
                                                   {"id": Nats-Msg-Id, "record": the record}
  (NATS over TLS and with a user: BUS_CA, BUS_USER and BUS_PASSWORD in the environment)
  bus_client.py kafka-read BOOTSTRAP TOPIC N SECONDS   messages until N arrived or SECONDS passed:
                                                   {"key": key, "partition": p, "record": …}
"""
import asyncio
import json
import os
import ssl
import sys
import time


async def nats_connect(port):
    import nats
    options = {}
    if os.environ.get("BUS_CA"):
        options["tls"] = ssl.create_default_context(cafile=os.environ["BUS_CA"])
    if os.environ.get("BUS_USER"):
        options["user"], options["password"] = os.environ["BUS_USER"], os.environ["BUS_PASSWORD"]
    scheme = "tls" if "tls" in options else "nats"
    return await nats.connect(f"{scheme}://127.0.0.1:{port}", **options)


async def nats_stream(port, name, subjects):
    nc = await nats_connect(port)
    await nc.jetstream().add_stream(name=name, subjects=subjects)
    await nc.close()


async def nats_read(port, subject_filter):
    nc = await nats_connect(port)
    sub = await nc.jetstream().pull_subscribe(subject_filter, durable=f"reader{int(time.time() * 1000)}")
    while True:
        try:
            messages = await sub.fetch(200, timeout=2)
        except Exception:
            break
        for m in messages:
            print(json.dumps({"id": (m.headers or {}).get("Nats-Msg-Id"), "record": json.loads(m.data)}))
            await m.ack()
    await nc.close()


def kafka_read(bootstrap, topic, n, seconds):
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"tests-{topic}-{time.time()}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got, end = 0, time.time() + seconds
    while got < n and time.time() < end:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        got += 1
        print(json.dumps({"key": m.key().decode() if m.key() else None, "partition": m.partition(),
                          "record": json.loads(m.value())}), flush=True)
    c.close()


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "nats-stream":
        asyncio.run(nats_stream(args[0], args[1], args[2:]))
    elif command == "nats-read":
        asyncio.run(nats_read(args[0], args[1]))
    elif command == "kafka-read":
        kafka_read(args[0], args[1], int(args[2]), float(args[3]))
    else:
        sys.exit(f"unknown command {command}")
