// See include/streamlens_gst.h, "Properties by name": any element's properties read and set as
// text, GStreamer's own conversion (the spec, the control channel).
#include "streamlens_gst.h"

gboolean sl_object_set_from_string(gpointer object, const char *name, const char *value) {
    if (!g_object_class_find_property(G_OBJECT_GET_CLASS(object), name)) return FALSE;
    gst_util_set_object_arg(G_OBJECT(object), name, value);
    return TRUE;
}

guint sl_object_property_flags(gpointer object, const char *name) {
    GParamSpec *spec = g_object_class_find_property(G_OBJECT_GET_CLASS(object), name);
    if (!spec) return 0;
    guint flags = SL_PROPERTY_EXISTS;
    if ((spec->flags & G_PARAM_WRITABLE) && !(spec->flags & G_PARAM_CONSTRUCT_ONLY)) flags |= SL_PROPERTY_WRITABLE;
    // Changeable while playing: marked so, or controllable (a GstController may drive it while
    // playing, e.g. videobalance's saturation).
    if (spec->flags & (GST_PARAM_MUTABLE_PLAYING | GST_PARAM_CONTROLLABLE)) flags |= SL_PROPERTY_MUTABLE_PLAYING;
    return flags;
}

// `value` as the property's type, in its range; FALSE (and `v` unset) when it is neither.
static gboolean sl_property_value(gpointer object, const char *name, const char *value, GValue *v) {
    GParamSpec *spec = g_object_class_find_property(G_OBJECT_GET_CLASS(object), name);
    if (!spec) return FALSE;
    g_value_init(v, spec->value_type);
    gboolean ok = gst_value_deserialize_with_pspec(v, value, spec);
    if (ok) ok = !g_param_value_validate(spec, v); // TRUE from validate means it had to clamp
    if (!ok) g_value_unset(v);
    return ok;
}

gboolean sl_object_value_valid(gpointer object, const char *name, const char *value) {
    GValue v = G_VALUE_INIT;
    if (!sl_property_value(object, name, value, &v)) return FALSE;
    g_value_unset(&v);
    return TRUE;
}

gboolean sl_object_set_checked(gpointer object, const char *name, const char *value) {
    GValue v = G_VALUE_INIT;
    if (!sl_property_value(object, name, value, &v)) return FALSE;
    g_object_set_property(G_OBJECT(object), name, &v);
    g_value_unset(&v);
    return TRUE;
}

char *sl_object_get_as_string(gpointer object, const char *name) {
    GParamSpec *spec = g_object_class_find_property(G_OBJECT_GET_CLASS(object), name);
    if (!spec) return NULL;
    GValue v = G_VALUE_INIT;
    g_value_init(&v, spec->value_type);
    g_object_get_property(G_OBJECT(object), name, &v);
    char *text = G_VALUE_HOLDS_STRING(&v) ? g_value_dup_string(&v)
               : G_VALUE_HOLDS_DOUBLE(&v) ? g_strdup_printf("%g", g_value_get_double(&v))
               : gst_value_serialize(&v);
    g_value_unset(&v);
    return text ? text : g_strdup("");
}
