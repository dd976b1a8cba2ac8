// See streamlens_gst.h, "Regions of interest": the one place that reads and writes
// GstVideoRegionOfInterestMeta, in Intel DL Streamer's layout so that its consumers (and
// anything written against it: gvapython scripts, gvametaconvert-like readers) see our regions.
#include "streamlens_gst.h"
#include <math.h>
#include <string.h>

static GstVideoRegionOfInterestMeta *sl_region_at(GstBuffer *buffer, guint index) {
    gpointer state = NULL;
    GstMeta *meta;
    guint n = 0;
    while ((meta = gst_buffer_iterate_meta_filtered(buffer, &state, GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE))) {
        if (n++ == index) return (GstVideoRegionOfInterestMeta *)meta;
    }
    return NULL;
}

static guint sl_pixel(double v) { return v <= 0 || !isfinite(v) ? 0 : (guint)lround(v); }

// The meta's rectangle (whole pixels) and parameter structures from `region`.
static gboolean sl_is_classification(const GstStructure *s) {
    return gst_structure_has_field_typed(s, "attribute_name", G_TYPE_STRING) && gst_structure_has_field_typed(s, "label", G_TYPE_STRING)
        && !gst_structure_has_name(s, "landmarks");
}

static void sl_region_fill(GstVideoRegionOfInterestMeta *meta, guint frame_width, guint frame_height, const SLRegion *region,
                           const double *keypoints, const char *const *names, const char *const *values, const SLRegionResults *results) {
    meta->roi_type = g_quark_from_string(region->label);
    guint x = sl_pixel(region->x), y = sl_pixel(region->y);
    meta->x = x; meta->y = y;
    meta->w = sl_pixel(region->x + region->width) > x ? sl_pixel(region->x + region->width) - x : 0;
    meta->h = sl_pixel(region->y + region->height) > y ? sl_pixel(region->y + region->height) - y : 0;
    g_list_free_full(meta->params, (GDestroyNotify)gst_structure_free);
    meta->params = NULL;
    double w = frame_width ? frame_width : 1, h = frame_height ? frame_height : 1;
    GstStructure *detection = gst_structure_new("detection",
        "x_min", G_TYPE_DOUBLE, region->x / w, "y_min", G_TYPE_DOUBLE, region->y / h,
        "x_max", G_TYPE_DOUBLE, (region->x + region->width) / w, "y_max", G_TYPE_DOUBLE, (region->y + region->height) / h,
        "label_id", G_TYPE_INT, region->label_id, NULL);
    if (region->confidence >= 0) gst_structure_set(detection, "confidence", G_TYPE_DOUBLE, region->confidence, NULL);
    // Not measured on this frame: "held" (a detector's earlier box repeated between its runs) or
    // "predicted" (a tracker's motion estimate). Absent: measured on this frame.
    if (region->estimate[0]) gst_structure_set(detection, "estimate", G_TYPE_STRING, region->estimate, NULL);
    gst_video_region_of_interest_meta_add_param(meta, detection);
    if (region->object_id >= 0)
        gst_video_region_of_interest_meta_add_param(meta, gst_structure_new("object_id", "id", G_TYPE_INT, region->object_id, NULL));
    if (region->keypoint_count > 0 && keypoints) {
        GValue points = G_VALUE_INIT, v = G_VALUE_INIT;
        g_value_init(&points, GST_TYPE_ARRAY);
        g_value_init(&v, G_TYPE_DOUBLE);
        for (guint i = 0; i < region->keypoint_count; i++) {
            g_value_set_double(&v, keypoints[2 * i] / w);
            gst_value_array_append_value(&points, &v);
            g_value_set_double(&v, keypoints[2 * i + 1] / h);
            gst_value_array_append_value(&points, &v);
        }
        GstStructure *s = gst_structure_new_empty("keypoints");
        gst_structure_take_value(s, "points", &points);
        g_value_unset(&v);
        gst_video_region_of_interest_meta_add_param(meta, s);
    }
    if (region->attribute_count > 0 && names && values) {
        GstStructure *s = gst_structure_new_empty("attributes");
        for (guint i = 0; i < region->attribute_count; i++)
            gst_structure_set(s, names[i], G_TYPE_STRING, values[i], NULL);
        gst_video_region_of_interest_meta_add_param(meta, s);
    }
    if (!results) return;
    for (guint i = 0; i < results->classification_count; i++) {
        GstStructure *s = gst_structure_new(results->classification_names[i], "attribute_name", G_TYPE_STRING, results->classification_names[i],
                                            "label", G_TYPE_STRING, results->classification_labels[i], "label_id", G_TYPE_INT, results->classification_ids[i],
                                            "confidence", G_TYPE_DOUBLE, results->classification_confidences[i], NULL);
        gst_video_region_of_interest_meta_add_param(meta, s);
    }
    if (results->landmark_count > 0 && results->landmarks && (results->landmark_dims == 2 || results->landmark_dims == 3)) {
        GValue points = G_VALUE_INIT, v = G_VALUE_INIT;
        g_value_init(&points, GST_TYPE_ARRAY);
        g_value_init(&v, G_TYPE_DOUBLE);
        guint d = results->landmark_dims;
        for (guint i = 0; i < results->landmark_count * d; i++) {
            g_value_set_double(&v, results->landmarks[i] / (i % d == 1 ? h : w));
            gst_value_array_append_value(&points, &v);
        }
        GstStructure *s = gst_structure_new("landmarks", "attribute_name", G_TYPE_STRING, results->landmark_name ? results->landmark_name : "landmarks",
                                            "dimensions", G_TYPE_INT, (gint)d, NULL);
        gst_structure_take_value(s, "points", &points);
        g_value_unset(&v);
        if (results->landmark_presence >= 0) gst_structure_set(s, "presence", G_TYPE_DOUBLE, results->landmark_presence, NULL);
        gst_video_region_of_interest_meta_add_param(meta, s);
    }
    if (results->mask && results->mask_width > 0 && results->mask_height > 0) {
        gsize size = (gsize)results->mask_width * results->mask_height;
        GstBuffer *data = gst_buffer_new_memdup(results->mask, size);
        GstStructure *s = gst_structure_new("mask", "width", G_TYPE_INT, (gint)results->mask_width, "height", G_TYPE_INT,
                                            (gint)results->mask_height, "format", G_TYPE_STRING, "GRAY8", "data", GST_TYPE_BUFFER, data, NULL);
        gst_buffer_unref(data);
        gst_video_region_of_interest_meta_add_param(meta, s);
    }
}

// The "mask" structure's data when it is what sl_region_fill writes (GRAY8, width x height bytes).
static GstBuffer *sl_mask_data(GstVideoRegionOfInterestMeta *roi, gint *width, gint *height) {
    GstStructure *mask = gst_video_region_of_interest_meta_get_param(roi, "mask");
    if (!mask || !gst_structure_get_int(mask, "width", width) || !gst_structure_get_int(mask, "height", height)
        || *width <= 0 || *height <= 0 || *width > 4096 || *height > 4096 || g_strcmp0(gst_structure_get_string(mask, "format"), "GRAY8") != 0)
        return NULL;
    const GValue *v = gst_structure_get_value(mask, "data");
    GstBuffer *data = v && G_VALUE_HOLDS(v, GST_TYPE_BUFFER) ? gst_value_get_buffer(v) : NULL;
    return data && gst_buffer_get_size(data) == (gsize)*width * (gsize)*height ? data : NULL;
}

gboolean sl_region_mask(const SLRegion *region, guint8 *out, gsize max) {
    gint w = 0, h = 0;
    GstBuffer *data = region->meta ? sl_mask_data(region->meta, &w, &h) : NULL;
    if (!data || (gsize)w * (gsize)h > max) return FALSE;
    return gst_buffer_extract(data, 0, out, (gsize)w * (gsize)h) == (gsize)w * (gsize)h;
}

void sl_buffer_add_region(GstBuffer *buffer, guint frame_width, guint frame_height, const SLRegion *region,
                          const double *keypoints, const char *const *names, const char *const *values, const SLRegionResults *results) {
    // Ids 0, 1, 2… in the buffer, so bindings can fetch each by id
    // (GstVideo.buffer_get_video_region_of_interest_meta_id in Python).
    gint id = 0;
    gpointer state = NULL;
    while (gst_buffer_iterate_meta_filtered(buffer, &state, GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE)) id++;
    GstVideoRegionOfInterestMeta *meta = gst_buffer_add_video_region_of_interest_meta(buffer, region->label, 0, 0, 0, 0);
    if (!meta) return;
    meta->id = id;
    sl_region_fill(meta, frame_width, frame_height, region, keypoints, names, values, results);
}

gboolean sl_buffer_set_region(GstBuffer *buffer, guint index, guint frame_width, guint frame_height, const SLRegion *region,
                              const double *keypoints, const char *const *names, const char *const *values, const SLRegionResults *results) {
    GstVideoRegionOfInterestMeta *meta = sl_region_at(buffer, index);
    if (!meta) return FALSE;
    sl_region_fill(meta, frame_width, frame_height, region, keypoints, names, values, results);
    return TRUE;
}

guint sl_buffer_get_regions(GstBuffer *buffer, guint frame_width, guint frame_height, SLRegion *regions, guint max) {
    gpointer state = NULL;
    GstMeta *meta;
    guint n = 0;
    while ((meta = gst_buffer_iterate_meta_filtered(buffer, &state, GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE))) {
        GstVideoRegionOfInterestMeta *roi = (GstVideoRegionOfInterestMeta *)meta;
        if (n < max && regions) {
            SLRegion *r = &regions[n];
            memset(r, 0, sizeof *r);
            g_strlcpy(r->label, roi->roi_type ? g_quark_to_string(roi->roi_type) : "", sizeof r->label);
            r->meta = roi;
            r->x = roi->x; r->y = roi->y; r->width = roi->w; r->height = roi->h;
            r->confidence = -1; r->label_id = -1; r->object_id = -1;
            GstStructure *detection = gst_video_region_of_interest_meta_get_param(roi, "detection");
            if (detection) {
                gst_structure_get_double(detection, "confidence", &r->confidence);
                gst_structure_get_int(detection, "label_id", &r->label_id);
                const char *estimate = gst_structure_get_string(detection, "estimate");
                if (estimate) g_strlcpy(r->estimate, estimate, sizeof r->estimate);
                // The normalised corners keep what whole pixels lose (a detector's 179.4).
                double x0, y0, x1, y1;
                if (frame_width && frame_height && gst_structure_get_double(detection, "x_min", &x0)
                    && gst_structure_get_double(detection, "y_min", &y0) && gst_structure_get_double(detection, "x_max", &x1)
                    && gst_structure_get_double(detection, "y_max", &y1) && isfinite(x0) && isfinite(y0) && isfinite(x1)
                    && isfinite(y1) && x1 >= x0 && y1 >= y0) {
                    r->x = x0 * frame_width; r->y = y0 * frame_height;
                    r->width = (x1 - x0) * frame_width; r->height = (y1 - y0) * frame_height;
                }
            }
            GstStructure *object = gst_video_region_of_interest_meta_get_param(roi, "object_id");
            if (object) gst_structure_get_int(object, "id", &r->object_id);
            GstStructure *keypoints = gst_video_region_of_interest_meta_get_param(roi, "keypoints");
            const GValue *points = keypoints ? gst_structure_get_value(keypoints, "points") : NULL;
            if (points && GST_VALUE_HOLDS_ARRAY(points)) r->keypoint_count = gst_value_array_get_size(points) / 2;
            GstStructure *attributes = gst_video_region_of_interest_meta_get_param(roi, "attributes");
            if (attributes) r->attribute_count = (guint)gst_structure_n_fields(attributes);
            r->landmark_presence = -1;
            for (GList *l = roi->params; l; l = l->next) if (sl_is_classification(l->data)) r->classification_count++;
            GstStructure *landmarks = gst_video_region_of_interest_meta_get_param(roi, "landmarks");
            const GValue *lp = landmarks ? gst_structure_get_value(landmarks, "points") : NULL;
            gint dims = 0;
            if (lp && GST_VALUE_HOLDS_ARRAY(lp) && gst_structure_get_int(landmarks, "dimensions", &dims) && (dims == 2 || dims == 3)) {
                r->landmark_dims = (guint)dims;
                r->landmark_count = gst_value_array_get_size(lp) / (guint)dims;
                gst_structure_get_double(landmarks, "presence", &r->landmark_presence);
            }
            gint mw = 0, mh = 0;
            if (sl_mask_data(roi, &mw, &mh)) { r->mask_width = (guint)mw; r->mask_height = (guint)mh; }
        }
        n++;
    }
    return n;
}

guint sl_region_keypoints(const SLRegion *region, guint frame_width, guint frame_height, double *xy, guint max) {
    GstVideoRegionOfInterestMeta *roi = region->meta;
    GstStructure *keypoints = roi ? gst_video_region_of_interest_meta_get_param(roi, "keypoints") : NULL;
    const GValue *points = keypoints ? gst_structure_get_value(keypoints, "points") : NULL;
    if (!points || !GST_VALUE_HOLDS_ARRAY(points)) return 0;
    guint n = gst_value_array_get_size(points) / 2, filled = 0;
    for (guint i = 0; i < n && filled < max; i++) {
        const GValue *x = gst_value_array_get_value(points, 2 * i), *y = gst_value_array_get_value(points, 2 * i + 1);
        if (!G_VALUE_HOLDS_DOUBLE(x) || !G_VALUE_HOLDS_DOUBLE(y)) continue;
        xy[2 * filled] = g_value_get_double(x) * frame_width;
        xy[2 * filled + 1] = g_value_get_double(y) * frame_height;
        filled++;
    }
    return filled;
}

gboolean sl_region_classification(const SLRegion *region, guint n, const char **name, const char **label, gint *label_id, double *confidence) {
    GstVideoRegionOfInterestMeta *roi = region->meta;
    guint i = 0;
    for (GList *l = roi ? roi->params : NULL; l; l = l->next) {
        GstStructure *s = l->data;
        if (!sl_is_classification(s) || i++ != n) continue;
        *name = gst_structure_get_string(s, "attribute_name");
        *label = gst_structure_get_string(s, "label");
        *label_id = -1; *confidence = 0;
        gst_structure_get_int(s, "label_id", label_id);
        gst_structure_get_double(s, "confidence", confidence);
        return TRUE;
    }
    return FALSE;
}

guint sl_region_landmarks(const SLRegion *region, guint frame_width, guint frame_height, double *values, guint max, const char **name) {
    GstVideoRegionOfInterestMeta *roi = region->meta;
    GstStructure *landmarks = roi ? gst_video_region_of_interest_meta_get_param(roi, "landmarks") : NULL;
    const GValue *points = landmarks ? gst_structure_get_value(landmarks, "points") : NULL;
    guint d = region->landmark_dims;
    if (!points || !GST_VALUE_HOLDS_ARRAY(points) || (d != 2 && d != 3)) return 0;
    *name = gst_structure_get_string(landmarks, "attribute_name");
    guint n = gst_value_array_get_size(points) / d, filled = 0;
    for (guint i = 0; i < n && filled < max; i++) {
        gboolean ok = TRUE;
        for (guint k = 0; k < d; k++) {
            const GValue *v = gst_value_array_get_value(points, i * d + k);
            if (!G_VALUE_HOLDS_DOUBLE(v)) { ok = FALSE; break; }
            values[filled * d + k] = g_value_get_double(v) * (k == 1 ? frame_height : frame_width);
        }
        if (ok) filled++;
    }
    return filled;
}

gboolean sl_region_attribute(const SLRegion *region, guint n, const char **name, const char **value) {
    GstVideoRegionOfInterestMeta *roi = region->meta;
    GstStructure *attributes = roi ? gst_video_region_of_interest_meta_get_param(roi, "attributes") : NULL;
    if (!attributes || n >= (guint)gst_structure_n_fields(attributes)) return FALSE;
    *name = gst_structure_nth_field_name(attributes, n);
    const GValue *v = gst_structure_get_value(attributes, *name);
    *value = v && G_VALUE_HOLDS_STRING(v) ? g_value_get_string(v) : "";
    return TRUE;
}

// ---- Frame metadata: one custom meta a buffer, its fields JSON text -------------------------
// A custom meta (GStreamer 1.20's gst_meta_register_custom) whose structure "streamlens-frame"
// holds one string field per kind of record about the whole frame ("events", "zones"), each a
// JSON document: any consumer reads it with gst_buffer_get_custom_meta and a JSON parser, and
// the default transform copies it with the buffer.
#define SL_FRAME_META "StreamLensFrameMeta"

static const GstMetaInfo *sl_frame_meta_info(void) {
    static gsize once = 0;
    static const GstMetaInfo *info;
    if (g_once_init_enter(&once)) {
        static const gchar *tags[] = { NULL };
        info = gst_meta_register_custom(SL_FRAME_META, tags, NULL, NULL, NULL);
        g_once_init_leave(&once, 1);
    }
    return info;
}

void sl_buffer_set_frame_field(GstBuffer *buffer, const char *name, const char *json) {
    sl_frame_meta_info();
    GstCustomMeta *meta = gst_buffer_get_custom_meta(buffer, SL_FRAME_META);
    if (!meta) meta = gst_buffer_add_custom_meta(buffer, SL_FRAME_META);
    if (!meta) return;
    gst_structure_set(gst_custom_meta_get_structure(meta), name, G_TYPE_STRING, json, NULL);
}

const char *sl_buffer_frame_field(GstBuffer *buffer, const char *name) {
    sl_frame_meta_info();
    GstCustomMeta *meta = gst_buffer_get_custom_meta(buffer, SL_FRAME_META);
    return meta ? gst_structure_get_string(gst_custom_meta_get_structure(meta), name) : NULL;
}
