// The GStreamer plugin descriptor of libgststreamlens.so (see plugin.c). Nothing to import.
#pragma once
