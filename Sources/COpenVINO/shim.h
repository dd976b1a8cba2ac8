// OpenVINO's C API from the pinned PyPI wheel; include path and -lopenvino_c come from the
// pkg-config file tools/setup.sh generates (.deps/pkgconfig/openvino.pc).
#include <openvino/c/openvino.h>
