#!/usr/bin/env python3
"""The train-style commands that make a shipped style, in order: a style that went on from an
earlier network (--init) records that network's own training under training.init, so its first
command is the earliest one. A record from before the content loss existed (no content_weight)
gets --content-weight 0, the training it had. Used by `make styles`.

    python3 tools/train_style/commands.py Models/embers.json
"""
import json
import sys


def commands(manifest_path):
    with open(manifest_path) as f:
        training = json.load(f).get("training")
    chain = []
    while training:
        command = training["command"]
        if "content_weight" not in training:
            command += " --content-weight 0"
        chain.insert(0, command)
        training = (training.get("init") or {}).get("training")
    return chain


if __name__ == "__main__":
    print("\n".join(commands(sys.argv[1])))
