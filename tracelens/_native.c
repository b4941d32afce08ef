/* tracelens._native: the C extension (see tracelens/native.py; types: _native.pyi).

   columns(): columns of decoded trace events, read straight from the msgspec structs' slots; an
   accelerator of tracelens.loader.columns.columnize (which has the same figures in pure Python, and
   is the reference the tests compare this against). One call turns a list of `CompleteEvent` structs (with
   `select`: only those of `event_type` with a usable `ts`, skipping other phases) into
   plain C arrays (returned as bytearrays for numpy.frombuffer); doing this with one `map(attrgetter)` pass per
   field costs more than msgspec's JSON decode itself.

   Contract (see `columns`): cat, name, pid and tid are factorized (codes in order of first appearance, None ->
   -1). A column this code cannot fill exactly like the Python path (an argument that is not an int, a number
   too big for a float) comes back as None, and the caller computes that
   column in Python. Anything unexpected in the structure itself (an event or args object of another type, a
   cat or name that is not a str) raises TypeError, and the caller falls back to Python for the whole chunk.

   memory_columns(): the same for the `[memory]` instant events among a chunk's decoded events (an accelerator of
   tracelens.loader.extras' Python path, which the tests compare it against).

   The others each compute what a numpy function beside its caller computes, in one pass and without temporary
   arrays: permute() (the merge's row order, in place), nest() and enclosing() (tracelens.model.nesting), link()
   (tracelens.model.linking) and step_of() (tracelens.model.steps). Each checks its inputs' shapes and ranges
   (ValueError); nest() and link() decline (None) what they cannot handle exactly, and their caller's numpy path
   runs instead. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "_native_fields.h" /* N_*_FIELDS, *_FIELDS, F_*: generated from tracelens/loader/fields.py */


#define SLOT(object, offset) (*(PyObject **)((char *)(object) + (offset)))

/* The byte offset of a struct field (a __slots__ member of `type`). */
static int slot_offset(PyObject *type, const char *name, Py_ssize_t *offset) {
    PyObject *descr = PyObject_GetAttrString(type, name);
    if (descr == NULL) return -1;
    if (!PyObject_TypeCheck(descr, &PyMemberDescr_Type)) {
        Py_DECREF(descr);
        PyErr_Format(PyExc_TypeError, "field %s is not a slot", name);
        return -1;
    }
    PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
    if (member->type != T_OBJECT_EX && member->type != T_OBJECT) {
        Py_DECREF(descr);
        PyErr_Format(PyExc_TypeError, "field %s is not an object slot", name);
        return -1;
    }
    *offset = member->offset;
    Py_DECREF(descr);
    return 0;
}

/* A bytearray of n items of `size` bytes (its buffer is returned through `data`). */
static PyObject *new_buffer(Py_ssize_t n, Py_ssize_t size, char **data) {
    PyObject *buffer = PyByteArray_FromStringAndSize(NULL, n * size);
    if (buffer != NULL) *data = PyByteArray_AS_STRING(buffer);
    return buffer;
}

/* The code of `value` in `lookup` (assigned in order of first appearance, appended to `values`); -1 on error. */
static int64_t code_of(PyObject *lookup, PyObject *values, PyObject *value) {
    PyObject *known = PyDict_GetItemWithError(lookup, value);
    if (known != NULL) return PyLong_AsLongLong(known);
    if (PyErr_Occurred()) return -1;
    Py_ssize_t code = PyList_GET_SIZE(values);
    PyObject *number = PyLong_FromSsize_t(code);
    if (number == NULL) return -1;
    int failed = PyDict_SetItem(lookup, value, number) < 0 || PyList_Append(values, value) < 0;
    Py_DECREF(number);
    return failed ? -1 : code;
}

/* The previous value looked up in a factorization and its code: consecutive events mostly share their category,
   process and thread, so an equality test often spares the dict look-up (and hashing a new str). */
typedef struct {
    PyObject *value; /* borrowed: alive in the events list for the whole call */
    int64_t code;
} LastCode;

/* Whether a and b (each a str, an int or None) are equal as dict keys are: same type and value. */
static int same_key(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    if (PyUnicode_CheckExact(a) && PyUnicode_CheckExact(b)) {
        Py_ssize_t length = PyUnicode_GET_LENGTH(a);
        return length == PyUnicode_GET_LENGTH(b) && PyUnicode_KIND(a) == PyUnicode_KIND(b) &&
               memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)length * PyUnicode_KIND(a)) == 0;
    }
    if (PyLong_CheckExact(a) && PyLong_CheckExact(b)) return PyObject_RichCompareBool(a, b, Py_EQ) == 1;
    return 0;
}

/* `code_of`, answered from `last` when the value is the previous one. */
static int64_t cached_code_of(PyObject *lookup, PyObject *values, PyObject *value, LastCode *last) {
    if (last->value != NULL && same_key(value, last->value)) return last->code;
    int64_t code = code_of(lookup, values, value);
    if (code >= 0) last->value = value, last->code = code;
    return code;
}

/* An int64 from an exact int; *ok = 0 when `value` is not one or does not fit. */
static int64_t as_int64(PyObject *value, int *ok) {
    if (!PyLong_CheckExact(value)) {
        *ok = 0;
        return -1;
    }
    int overflow = 0;
    long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow || (number == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        *ok = 0;
        return -1;
    }
    return (int64_t)number;
}

/* A double from an exact float or int (correctly rounded, like float(int)); *ok = 0 otherwise. */
static double as_double(PyObject *value, int *ok) {
    if (PyFloat_CheckExact(value)) return PyFloat_AS_DOUBLE(value);
    if (PyLong_CheckExact(value)) {
        double number = PyLong_AsDouble(value);
        if (number == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            *ok = 0;
        }
        return number;
    }
    *ok = 0;
    return 0.0;
}

/* An `args` integer: an int that fits (else -1, as the Python path gives), None -> -1; *ok = 0 for any other
   type (a numeric string: the caller's Python path reads it). */
static int64_t arg_int(PyObject *value, int *ok) {
    if (value == Py_None) return -1;
    if (!PyLong_CheckExact(value)) {
        *ok = 0;
        return -1;
    }
    int overflow = 0;
    long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (number == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        *ok = 0;
        return -1;
    }
    return overflow ? -1 : (int64_t)number;
}

/* The product of a list of ints (grid or block dims); -1 for anything but a non-empty list and for a product
   that leaves int64; *ok = 0 when an item is not an int that fits int64 (the caller's Python path reads it). */
static int64_t dims_product(PyObject *value, int *ok) {
    if (!PyList_CheckExact(value) || PyList_GET_SIZE(value) == 0) return -1;
    int64_t product = 1;
    int overflow = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(value); i++) {
        int item_ok = 1;
        int64_t item = as_int64(PyList_GET_ITEM(value, i), &item_ok);
        if (!item_ok) {
            *ok = 0;
            return -1;
        }
        overflow |= __builtin_mul_overflow(product, item, &product);
    }
    return overflow ? -1 : product;
}

typedef struct {
    PyObject *rows;   /* bytearray of int64 row numbers */
    PyObject *values; /* list of bytes */
    Py_ssize_t count;
} RawColumn;

static PyObject *columns(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 5) {
        PyErr_SetString(PyExc_TypeError, "columns(events, event_type, args_type, raw_type, select)");
        return NULL;
    }
    PyObject *events = argv[0], *event_type = argv[1], *args_type = argv[2], *raw_type = argv[3];
    int select = PyObject_IsTrue(argv[4]);
    if (select < 0) return NULL;
    if (!PyList_CheckExact(events) || !PyType_Check(event_type) || !PyType_Check(args_type) ||
        !PyType_Check(raw_type)) {
        PyErr_SetString(PyExc_TypeError, "columns(list, type, type, type)");
        return NULL;
    }
    Py_ssize_t event_offsets[N_EVENT_FIELDS], int_offsets[N_INT_FIELDS], dim_offsets[N_DIM_FIELDS],
        raw_offsets[N_RAW_FIELDS];
    for (int f = 0; f < N_EVENT_FIELDS; f++)
        if (slot_offset(event_type, EVENT_FIELDS[f], &event_offsets[f]) < 0) return NULL;
    for (int f = 0; f < N_INT_FIELDS; f++)
        if (slot_offset(args_type, INT_FIELDS[f], &int_offsets[f]) < 0) return NULL;
    for (int f = 0; f < N_DIM_FIELDS; f++)
        if (slot_offset(args_type, DIM_FIELDS[f], &dim_offsets[f]) < 0) return NULL;
    for (int f = 0; f < N_RAW_FIELDS; f++)
        if (slot_offset(args_type, RAW_FIELDS[f], &raw_offsets[f]) < 0) return NULL;

    Py_ssize_t n = PyList_GET_SIZE(events);
    PyObject *result = NULL;
    PyObject *cat_lookup = PyDict_New(), *cat_values = PyList_New(0);
    PyObject *name_lookup = PyDict_New(), *name_values = PyList_New(0);
    PyObject *pid_lookup = PyDict_New(), *pid_values = PyList_New(0);
    PyObject *tid_lookup = PyDict_New(), *tid_values = PyList_New(0);
    PyObject *buffers[6 + N_INT_FIELDS + N_DIM_FIELDS] = {NULL};
    RawColumn raws[N_RAW_FIELDS] = {{NULL, NULL, 0}};
    int64_t *cat_codes, *name_codes, *pids, *tids, *ints[N_INT_FIELDS], *dims[N_DIM_FIELDS];
    double *ts, *dur;
    int ts_ok = 1, dur_ok = 1, int_ok[N_INT_FIELDS], dim_ok[N_DIM_FIELDS];
    if (cat_lookup == NULL || cat_values == NULL || name_lookup == NULL || name_values == NULL ||
        pid_lookup == NULL || pid_values == NULL || tid_lookup == NULL || tid_values == NULL)
        goto done;
    if ((buffers[0] = new_buffer(n, 8, (char **)&cat_codes)) == NULL) goto done;
    if ((buffers[1] = new_buffer(n, 8, (char **)&name_codes)) == NULL) goto done;
    if ((buffers[2] = new_buffer(n, 8, (char **)&pids)) == NULL) goto done;
    if ((buffers[3] = new_buffer(n, 8, (char **)&tids)) == NULL) goto done;
    if ((buffers[4] = new_buffer(n, 8, (char **)&ts)) == NULL) goto done;
    if ((buffers[5] = new_buffer(n, 8, (char **)&dur)) == NULL) goto done;
    for (int f = 0; f < N_INT_FIELDS; f++) {
        int_ok[f] = 1;
        if ((buffers[6 + f] = new_buffer(n, 8, (char **)&ints[f])) == NULL) goto done;
    }
    for (int f = 0; f < N_DIM_FIELDS; f++) {
        dim_ok[f] = 1;
        if ((buffers[6 + N_INT_FIELDS + f] = new_buffer(n, 8, (char **)&dims[f])) == NULL) goto done;
    }
    for (int f = 0; f < N_RAW_FIELDS; f++) {
        if ((raws[f].rows = PyByteArray_FromStringAndSize(NULL, 0)) == NULL) goto done;
        if ((raws[f].values = PyList_New(0)) == NULL) goto done;
    }

    Py_ssize_t kept = 0;
    LastCode last_cat = {NULL, 0}, last_pid = {NULL, 0}, last_tid = {NULL, 0};
    PyObject *empty_raw = NULL; /* the shared default of absent raw fields, once seen: skipped by identity */
    for (Py_ssize_t e = 0; e < n; e++) {
        PyObject *event = PyList_GET_ITEM(events, e);
        if ((PyObject *)Py_TYPE(event) != event_type) {
            if (select) continue; /* another phase */
            PyErr_SetString(PyExc_TypeError, "an event of another type");
            goto done;
        }
        if (select) { /* a complete event needs a time: not None, not NaN or infinite (an int always is one) */
            PyObject *time = SLOT(event, event_offsets[F_TS]);
            if (time == NULL) goto unset;
            if (time == Py_None || (PyFloat_CheckExact(time) && !isfinite(PyFloat_AS_DOUBLE(time)))) continue;
        }
        Py_ssize_t i = kept++;
        PyObject *cat = SLOT(event, event_offsets[F_CAT]), *name = SLOT(event, event_offsets[F_NAME]);
        if (cat == NULL || name == NULL || !PyUnicode_CheckExact(cat) || !PyUnicode_CheckExact(name)) {
            PyErr_SetString(PyExc_TypeError, "cat or name is not a str");
            goto done;
        }
        if ((cat_codes[i] = cached_code_of(cat_lookup, cat_values, cat, &last_cat)) < 0) goto done;
        if ((name_codes[i] = code_of(name_lookup, name_values, name)) < 0) goto done;
        PyObject *value;
        if ((value = SLOT(event, event_offsets[F_PID])) == NULL) goto unset;
        if (value == Py_None) pids[i] = -1;
        else if ((pids[i] = cached_code_of(pid_lookup, pid_values, value, &last_pid)) < 0) goto done;
        if ((value = SLOT(event, event_offsets[F_TID])) == NULL) goto unset;
        if (value == Py_None) tids[i] = -1;
        else if ((tids[i] = cached_code_of(tid_lookup, tid_values, value, &last_tid)) < 0) goto done;
        if ((value = SLOT(event, event_offsets[F_TS])) == NULL) goto unset;
        ts[i] = as_double(value, &ts_ok);
        if ((value = SLOT(event, event_offsets[F_DUR])) == NULL) goto unset;
        dur[i] = value == Py_None ? Py_NAN : as_double(value, &dur_ok); /* as numpy reads None */

        PyObject *args = SLOT(event, event_offsets[F_ARGS]);
        if (args == NULL) goto unset;
        if (args == Py_None) {
            for (int f = 0; f < N_INT_FIELDS; f++) ints[f][i] = -1;
            for (int f = 0; f < N_DIM_FIELDS; f++) dims[f][i] = -1;
            continue;
        }
        if ((PyObject *)Py_TYPE(args) != args_type) {
            PyErr_SetString(PyExc_TypeError, "args of another type");
            goto done;
        }
        for (int f = 0; f < N_INT_FIELDS; f++) {
            if ((value = SLOT(args, int_offsets[f])) == NULL) goto unset;
            ints[f][i] = arg_int(value, &int_ok[f]);
        }
        for (int f = 0; f < N_DIM_FIELDS; f++) {
            if ((value = SLOT(args, dim_offsets[f])) == NULL) goto unset;
            dims[f][i] = dims_product(value, &dim_ok[f]);
        }
        for (int f = 0; f < N_RAW_FIELDS; f++) {
            if ((value = SLOT(args, raw_offsets[f])) == NULL) goto unset;
            if (value == empty_raw) continue;
            if ((PyObject *)Py_TYPE(value) != raw_type) {
                PyErr_SetString(PyExc_TypeError, "a raw field of another type");
                goto done;
            }
            Py_buffer view;
            if (PyObject_GetBuffer(value, &view, PyBUF_SIMPLE) < 0) goto done;
            if (view.len > 0) {
                int64_t row = (int64_t)i;
                PyObject *copy = PyBytes_FromStringAndSize(view.buf, view.len);
                int failed = copy == NULL || PyList_Append(raws[f].values, copy) < 0 ||
                             PyByteArray_Resize(raws[f].rows, (raws[f].count + 1) * 8) < 0;
                Py_XDECREF(copy);
                if (failed) {
                    PyBuffer_Release(&view);
                    goto done;
                }
                memcpy(PyByteArray_AS_STRING(raws[f].rows) + raws[f].count * 8, &row, 8);
                raws[f].count++;
            } else {
                empty_raw = value;
            }
            PyBuffer_Release(&view);
        }
    }

    for (size_t b = 0; b < sizeof(buffers) / sizeof(buffers[0]); b++)
        if (PyByteArray_Resize(buffers[b], kept * 8) < 0) goto done;
    {
        PyObject *int_columns = PyTuple_New(N_INT_FIELDS), *dim_columns = PyTuple_New(N_DIM_FIELDS),
                 *raw_columns = PyTuple_New(N_RAW_FIELDS);
        if (int_columns == NULL || dim_columns == NULL || raw_columns == NULL) {
            Py_XDECREF(int_columns);
            Py_XDECREF(dim_columns);
            Py_XDECREF(raw_columns);
            goto done;
        }
        for (int f = 0; f < N_INT_FIELDS; f++) {
            PyObject *column = int_ok[f] ? buffers[6 + f] : Py_None;
            Py_INCREF(column);
            PyTuple_SET_ITEM(int_columns, f, column);
        }
        for (int f = 0; f < N_DIM_FIELDS; f++) {
            PyObject *column = dim_ok[f] ? buffers[6 + N_INT_FIELDS + f] : Py_None;
            Py_INCREF(column);
            PyTuple_SET_ITEM(dim_columns, f, column);
        }
        for (int f = 0; f < N_RAW_FIELDS; f++) {
            PyObject *pair = PyTuple_Pack(2, raws[f].rows, raws[f].values);
            if (pair == NULL) {
                Py_DECREF(int_columns);
                Py_DECREF(dim_columns);
                Py_DECREF(raw_columns);
                goto done;
            }
            PyTuple_SET_ITEM(raw_columns, f, pair);
        }
        result = Py_BuildValue("(OOOOOOOOOONNN)", buffers[0], cat_values, buffers[1], name_values, buffers[2],
                               pid_values, buffers[3], tid_values, ts_ok ? buffers[4] : Py_None,
                               dur_ok ? buffers[5] : Py_None, int_columns, dim_columns, raw_columns);
    }
    goto done;

unset:
    PyErr_SetString(PyExc_TypeError, "a struct field is unset");
done:
    Py_XDECREF(cat_lookup);
    Py_XDECREF(cat_values);
    Py_XDECREF(name_lookup);
    Py_XDECREF(name_values);
    Py_XDECREF(pid_lookup);
    Py_XDECREF(pid_values);
    Py_XDECREF(tid_lookup);
    Py_XDECREF(tid_values);
    for (size_t b = 0; b < sizeof(buffers) / sizeof(buffers[0]); b++) Py_XDECREF(buffers[b]);
    for (int f = 0; f < N_RAW_FIELDS; f++) {
        Py_XDECREF(raws[f].rows);
        Py_XDECREF(raws[f].values);
    }
    return result;
}

#define N_MEMORY_FIELDS 6
static const char *MEMORY_FIELDS[N_MEMORY_FIELDS] = {"bytes", "total_allocated", "total_reserved",
                                                     "device_id", "device_type", "addr"};
static const int64_t MEMORY_DEFAULTS[N_MEMORY_FIELDS] = {0, -1, -1, -1, -1, -1}; /* `MemoryArgs()` */
enum { M_NAME, M_PID, M_TID, M_TS, M_ARGS, N_INSTANT_FIELDS };
static const char *INSTANT_FIELDS[N_INSTANT_FIELDS] = {"name", "pid", "tid", "ts", "args"};

/* A memory event's `ts` as the Python path reads it: *usable = 0 (the event is skipped) for None, a non-finite
   float or anything but an exact int or float; an int beyond float range reads NaN. */
static double memory_ts(PyObject *value, int *usable) {
    *usable = 1;
    if (PyFloat_CheckExact(value)) {
        double number = PyFloat_AS_DOUBLE(value);
        *usable = isfinite(number);
        return number;
    }
    if (PyLong_CheckExact(value)) {
        double number = PyLong_AsDouble(value);
        if (number == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return Py_NAN;
        }
        return number;
    }
    *usable = 0;
    return 0.0;
}

/* The code of the pair (pid, tid) in `lookup` (first appearance order, the pairs appended to `pairs`); -1 on
   error. */
static int64_t pair_code(PyObject *lookup, PyObject *pairs, PyObject *pid, PyObject *tid) {
    PyObject *pair = PyTuple_Pack(2, pid, tid);
    if (pair == NULL) return -1;
    int64_t code = code_of(lookup, pairs, pair);
    Py_DECREF(pair);
    return code;
}

/* The integer args of one memory event into row `i` of `ints` (None -> -1, an int beyond int64 -> -1); -1 (a
   TypeError set) when `args` is not None or of `args_type`, or a field is not an int or None. */
static int memory_ints(PyObject *args, PyObject *args_type, const Py_ssize_t *offsets, int64_t **ints,
                       Py_ssize_t i) {
    if (args == Py_None) {
        for (int f = 0; f < N_MEMORY_FIELDS; f++) ints[f][i] = MEMORY_DEFAULTS[f];
        return 0;
    }
    if ((PyObject *)Py_TYPE(args) != args_type) {
        PyErr_SetString(PyExc_TypeError, "memory args of another type");
        return -1;
    }
    for (int f = 0; f < N_MEMORY_FIELDS; f++) {
        PyObject *value = SLOT(args, offsets[f]);
        int ok = 1;
        if (value == NULL) {
            PyErr_SetString(PyExc_TypeError, "a struct field is unset");
            return -1;
        }
        ints[f][i] = arg_int(value, &ok);
        if (!ok) {
            PyErr_SetString(PyExc_TypeError, "a memory field that is not an int");
            return -1;
        }
    }
    return 0;
}

/* memory_columns(events, instant_types, args_type, memory_name, counter_type, meta_type): the instant events (of a type in
   the tuple `instant_types`, whose field slots must be those of its first type) named `memory_name`
   with a usable `ts`, as (ts float64 bytearray, (bytes, total_allocated, total_reserved, device_id, device_type,
   addr) int64 bytearrays, (pid, tid) pair codes int64 bytearray, the pairs in order of first appearance,
   whether any event is of `counter_type`, whether any is of `meta_type`: the `ph: "M"` events, read by Python from
   the chunks that have one). TypeError for anything the Python path would read differently. */
static PyObject *memory_columns(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 6 || !PyList_CheckExact(argv[0]) || !PyTuple_CheckExact(argv[1]) || PyTuple_GET_SIZE(argv[1]) < 1 ||
        !PyType_Check(argv[2]) || !PyUnicode_CheckExact(argv[3]) || !PyType_Check(argv[4]) || !PyType_Check(argv[5])) {
        PyErr_SetString(PyExc_TypeError, "memory_columns(list, tuple of types, type, str, type, type)");
        return NULL;
    }
    PyObject *events = argv[0], *instant_types = argv[1], *args_type = argv[2], *marker = argv[3];
    PyObject *counter_type = argv[4], *meta_type = argv[5];
    Py_ssize_t n_types = PyTuple_GET_SIZE(instant_types);
    Py_ssize_t offsets[N_INSTANT_FIELDS], arg_offsets[N_MEMORY_FIELDS];
    for (Py_ssize_t t = 0; t < n_types; t++) {
        PyObject *type = PyTuple_GET_ITEM(instant_types, t);
        if (!PyType_Check(type)) {
            PyErr_SetString(PyExc_TypeError, "instant_types holds a non-type");
            return NULL;
        }
        for (int f = 0; f < N_INSTANT_FIELDS; f++) {
            Py_ssize_t offset;
            if (slot_offset(type, INSTANT_FIELDS[f], &offset) < 0) return NULL;
            if (t > 0 && offset != offsets[f]) {
                PyErr_SetString(PyExc_TypeError, "instant types with different layouts");
                return NULL;
            }
            offsets[f] = offset;
        }
    }
    for (int f = 0; f < N_MEMORY_FIELDS; f++)
        if (slot_offset(args_type, MEMORY_FIELDS[f], &arg_offsets[f]) < 0) return NULL;

    Py_ssize_t n = PyList_GET_SIZE(events), kept = 0;
    int has_counters = 0, has_meta = 0;
    PyObject *result = NULL, *lookup = PyDict_New(), *pairs = PyList_New(0);
    PyObject *buffers[2 + N_MEMORY_FIELDS] = {NULL};
    double *ts;
    int64_t *codes, *ints[N_MEMORY_FIELDS];
    PyObject *last_pid = NULL, *last_tid = NULL; /* borrowed: the previous kept event's, alive in `events` */
    int64_t last_code = -1;
    if (lookup == NULL || pairs == NULL) goto done;
    /* sized for every event: resized to the memory events at the end */
    if ((buffers[0] = new_buffer(n, 8, (char **)&ts)) == NULL) goto done;
    if ((buffers[1] = new_buffer(n, 8, (char **)&codes)) == NULL) goto done;
    for (int f = 0; f < N_MEMORY_FIELDS; f++)
        if ((buffers[2 + f] = new_buffer(n, 8, (char **)&ints[f])) == NULL) goto done;

    for (Py_ssize_t e = 0; e < n; e++) {
        PyObject *event = PyList_GET_ITEM(events, e), *type = (PyObject *)Py_TYPE(event);
        int instant = 0;
        for (Py_ssize_t t = 0; t < n_types && !instant; t++) instant = type == PyTuple_GET_ITEM(instant_types, t);
        if (!instant) {
            has_counters |= type == counter_type;
            has_meta |= type == meta_type;
            continue;
        }
        PyObject *name = SLOT(event, offsets[M_NAME]), *pid = SLOT(event, offsets[M_PID]);
        PyObject *tid = SLOT(event, offsets[M_TID]), *time = SLOT(event, offsets[M_TS]);
        PyObject *args = SLOT(event, offsets[M_ARGS]);
        if (name == NULL || pid == NULL || tid == NULL || time == NULL || args == NULL) {
            PyErr_SetString(PyExc_TypeError, "a struct field is unset");
            goto done;
        }
        if (!PyUnicode_CheckExact(name)) {
            PyErr_SetString(PyExc_TypeError, "a name that is not a str");
            goto done;
        }
        int same = PyUnicode_Compare(name, marker);
        if (same == -1 && PyErr_Occurred()) goto done;
        if (same != 0) continue;
        int usable;
        double value = memory_ts(time, &usable);
        if (!usable) continue;
        Py_ssize_t i = kept++;
        ts[i] = value;
        if (memory_ints(args, args_type, arg_offsets, ints, i) < 0) goto done;
        if (last_pid != NULL) { /* consecutive events mostly share their thread: no tuple, no look-up */
            int equal = PyObject_RichCompareBool(pid, last_pid, Py_EQ);
            if (equal > 0) equal = PyObject_RichCompareBool(tid, last_tid, Py_EQ);
            if (equal < 0) goto done;
            if (equal) {
                codes[i] = last_code;
                continue;
            }
        }
        if ((codes[i] = pair_code(lookup, pairs, pid, tid)) < 0) goto done;
        last_pid = pid, last_tid = tid, last_code = codes[i];
    }
    for (size_t b = 0; b < sizeof(buffers) / sizeof(buffers[0]); b++)
        if (PyByteArray_Resize(buffers[b], kept * 8) < 0) goto done;
    {
        PyObject *int_columns = PyTuple_New(N_MEMORY_FIELDS);
        if (int_columns == NULL) goto done;
        for (int f = 0; f < N_MEMORY_FIELDS; f++) {
            Py_INCREF(buffers[2 + f]);
            PyTuple_SET_ITEM(int_columns, f, buffers[2 + f]);
        }
        result = Py_BuildValue("(ONOOOO)", buffers[0], int_columns, buffers[1], pairs, has_counters ? Py_True : Py_False,
                               has_meta ? Py_True : Py_False);
    }
done:
    Py_XDECREF(lookup);
    Py_XDECREF(pairs);
    for (size_t b = 0; b < sizeof(buffers) / sizeof(buffers[0]); b++) Py_XDECREF(buffers[b]);
    return result;
}

/* A C-contiguous buffer of n int64 values (n = -1: any length, returned through *n). */
static int int64_buffer(PyObject *object, Py_buffer *view, Py_ssize_t *n) {
    if (PyObject_GetBuffer(object, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    const char *format = view->format == NULL ? "B" : view->format;
    if (view->itemsize != 8 || (strcmp(format, "l") != 0 && strcmp(format, "q") != 0 && strcmp(format, "=q") != 0 &&
                                strcmp(format, "<q") != 0 && strcmp(format, "<l") != 0)) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_TypeError, "expected an int64 array");
        return -1;
    }
    if (*n >= 0 && view->len / 8 != *n) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "arrays of different lengths");
        return -1;
    }
    *n = view->len / 8;
    return 0;
}

/* Whether an event [., end_c) that started at or before one [start, end) encloses it: still running at its start
   (or ending with it) and ending no more than `tolerance` ns before it (`tracelens.model.nesting`'s contract). */
static inline int encloses(int64_t end_c, int64_t start, int64_t end, int64_t tolerance) {
    return (end_c > start || end_c >= end) && end_c >= end - tolerance;
}

/* enclosing(start, end, track, tolerance) for rows sorted by (track, start, -end, ...): each row's innermost
   earlier row on its track that encloses it (still running at its start, or ending with it, and ending at or after
   its end less `tolerance` ns), walking up
   from the previous row through the rows already found to enclose; -1 for none. Also each row's depth (its
   number of enclosing ancestors). Same result as tracelens.model.nesting's vectorised pointer jumping, in one
   pass. */
static PyObject *enclosing(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 4) {
        PyErr_SetString(PyExc_TypeError, "enclosing(start, end, track, tolerance)");
        return NULL;
    }
    const long long tolerance = PyLong_AsLongLong(argv[3]);
    if (tolerance == -1 && PyErr_Occurred()) return NULL;
    Py_buffer views[3];
    Py_ssize_t n = -1;
    int held = 0;
    PyObject *cand_buffer = NULL, *depth_buffer = NULL, *result = NULL;
    for (; held < 3; held++)
        if (int64_buffer(argv[held], &views[held], &n) < 0) goto done;
    const int64_t *start = views[0].buf, *end = views[1].buf, *track = views[2].buf;
    int64_t *cand;
    int32_t *depth;
    if ((cand_buffer = new_buffer(n, 8, (char **)&cand)) == NULL) goto done;
    if ((depth_buffer = new_buffer(n, 4, (char **)&depth)) == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t c = (i > 0 && track[i] == track[i - 1]) ? (int64_t)(i - 1) : -1;
        while (c >= 0 && !encloses(end[c], start[i], end[i], tolerance)) c = cand[c];
        cand[i] = c;
        depth[i] = c >= 0 ? depth[c] + 1 : 0;
    }
    result = PyTuple_Pack(2, cand_buffer, depth_buffer);
done:
    for (int b = 0; b < held; b++) PyBuffer_Release(&views[b]);
    Py_XDECREF(cand_buffer);
    Py_XDECREF(depth_buffer);
    return result;
}

/* The permutation check of `permute`: every value of order[0..n) in [0, n) exactly once (`seen`: n zeroed bits,
   left set). */
static int is_permutation(const int64_t *order, Py_ssize_t n, uint8_t *seen) {
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t j = order[i];
        if (j < 0 || j >= n || (seen[j >> 3] >> (j & 7)) & 1) return 0;
        seen[j >> 3] |= (uint8_t)(1u << (j & 7));
    }
    return 1;
}

/* column[i] = column[order[i]] for every i, in place, cycle by cycle (`done`: n zeroed bits, left set). */
#define PERMUTE_CYCLES(TYPE)                                                                   \
    static void permute_##TYPE(TYPE *column, const int64_t *order, Py_ssize_t n, uint8_t *done) { \
        for (Py_ssize_t start = 0; start < n; start++) {                                       \
            if ((done[start >> 3] >> (start & 7)) & 1) continue;                               \
            TYPE first = column[start];                                                        \
            Py_ssize_t i = start;                                                              \
            for (;;) {                                                                         \
                done[i >> 3] |= (uint8_t)(1u << (i & 7));                                      \
                Py_ssize_t j = (Py_ssize_t)order[i];                                           \
                if (j == start) {                                                              \
                    column[i] = first;                                                         \
                    break;                                                                     \
                }                                                                              \
                column[i] = column[j];                                                         \
                i = j;                                                                         \
            }                                                                                  \
        }                                                                                      \
    }
PERMUTE_CYCLES(uint8_t)
PERMUTE_CYCLES(uint16_t)
PERMUTE_CYCLES(uint32_t)
PERMUTE_CYCLES(uint64_t)

/* permute(order, columns): `column[:] = column[order]` for each writable C-contiguous column of a tuple (items
   of 1, 2, 4 or 8 bytes, as many as `order`), in place: no second copy of any column. `order` (int64) must be a
   permutation of range(len(order)), else ValueError and no column is changed. Same result as numpy's
   `column[order]`, which is the pure-Python path. */
static PyObject *permute(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 2 || !PyTuple_CheckExact(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "permute(order, tuple of columns)");
        return NULL;
    }
    Py_buffer order_view;
    Py_ssize_t n = -1;
    if (int64_buffer(argv[0], &order_view, &n) < 0) return NULL;
    Py_ssize_t n_columns = PyTuple_GET_SIZE(argv[1]), held = 0;
    Py_buffer *views = PyMem_Calloc((size_t)(n_columns > 0 ? n_columns : 1), sizeof(Py_buffer));
    uint8_t *bits = PyMem_Calloc((size_t)(n / 8 + 1), 1);
    PyObject *result = NULL;
    if (views == NULL || bits == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; held < n_columns; held++) {
        Py_buffer *view = &views[held];
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(argv[1], held), view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
            goto done;
        Py_ssize_t size = view->itemsize;
        if ((size != 1 && size != 2 && size != 4 && size != 8) || view->len != n * size) {
            PyBuffer_Release(view);
            PyErr_SetString(PyExc_ValueError, "a column of another length or item size");
            goto done;
        }
    }
    if (!is_permutation(order_view.buf, n, bits)) {
        PyErr_SetString(PyExc_ValueError, "order is not a permutation");
        goto done;
    }
    for (Py_ssize_t c = 0; c < n_columns; c++) {
        memset(bits, 0, (size_t)(n / 8 + 1));
        switch (views[c].itemsize) {
        case 1: permute_uint8_t(views[c].buf, order_view.buf, n, bits); break;
        case 2: permute_uint16_t(views[c].buf, order_view.buf, n, bits); break;
        case 4: permute_uint32_t(views[c].buf, order_view.buf, n, bits); break;
        default: permute_uint64_t(views[c].buf, order_view.buf, n, bits); break;
        }
    }
    result = Py_NewRef(Py_None);
done:
    for (Py_ssize_t c = 0; c < held; c++) PyBuffer_Release(&views[c]);
    PyBuffer_Release(&order_view);
    PyMem_Free(views);
    PyMem_Free(bits);
    return result;
}

/* A C-contiguous buffer of n items of `itemsize` bytes (n = -1: any length, returned through *n); the format
   is not checked (the caller passes numpy arrays of a known dtype, checked in Python). */
static int sized_buffer(PyObject *object, Py_buffer *view, Py_ssize_t itemsize, Py_ssize_t *n) {
    if (PyObject_GetBuffer(object, view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (view->itemsize != itemsize || (*n >= 0 && view->len / itemsize != *n)) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "an array of another length or item size");
        return -1;
    }
    *n = view->len / itemsize;
    return 0;
}

/* numpy's int64 arithmetic (wrapping) */
static inline int64_t wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t wrap_neg(int64_t a) { return (int64_t)(0 - (uint64_t)a); }

typedef struct {
    int64_t neg_end;
    int64_t row;
    int8_t tie;
} TieKey;

static int tie_key_less(const TieKey *a, const TieKey *b) {
    if (a->neg_end != b->neg_end) return a->neg_end < b->neg_end;
    if (a->tie != b->tie) return a->tie < b->tie;
    return a->row < b->row;
}

static int tie_key_compare(const void *a, const void *b) {
    return tie_key_less(a, b) ? -1 : tie_key_less(b, a) ? 1 : 0;
}

typedef struct {
    const int64_t *ts, *dur;
    const int8_t *kind, *tie_of_kind;
} NestTable;

static inline int64_t end_of(const NestTable *table, int64_t row) { return wrap_add(table->ts[row], table->dur[row]); }

/* Rows of one track that share a start, ordered by (-end, tie, row): insertion sort for a few, qsort beyond (a
   hostile trace may put every event at one time). `keys` has room for `count`. */
static void sort_tied(int64_t *rows, Py_ssize_t count, const NestTable *table, TieKey *keys) {
    for (Py_ssize_t k = 0; k < count; k++)
        keys[k] = (TieKey){wrap_neg(end_of(table, rows[k])), rows[k], table->tie_of_kind[table->kind[rows[k]]]};
    if (count <= 16) {
        for (Py_ssize_t k = 1; k < count; k++) {
            TieKey key = keys[k];
            Py_ssize_t j = k;
            for (; j > 0 && tie_key_less(&key, &keys[j - 1]); j--) keys[j] = keys[j - 1];
            keys[j] = key;
        }
    } else {
        qsort(keys, (size_t)count, sizeof(TieKey), tie_key_compare);
    }
    for (Py_ssize_t k = 0; k < count; k++) rows[k] = keys[k].row;
}

/* Sort each run of rows (in `order`, n of them) that share a track and a start by (-end, tie, row); -1 (memory
   error set) on failure. */
static int sort_tied_runs(int64_t *order, Py_ssize_t n, const int32_t *track, const NestTable *table) {
    Py_ssize_t longest = 0;
    for (Py_ssize_t a = 0, b; a < n; a = b) {
        for (b = a + 1; b < n && track[order[b]] == track[order[a]] && table->ts[order[b]] == table->ts[order[a]];)
            b++;
        longest = b - a > longest ? b - a : longest;
    }
    if (longest < 2) return 0;
    TieKey *keys = PyMem_Malloc((size_t)longest * sizeof(TieKey));
    if (keys == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t a = 0, b; a < n; a = b) {
        for (b = a + 1; b < n && track[order[b]] == track[order[a]] && table->ts[order[b]] == table->ts[order[a]];)
            b++;
        if (b - a > 1) sort_tied(order + a, b - a, table, keys);
    }
    PyMem_Free(keys);
    return 0;
}

/* nest(ts_ns, dur_ns, track, kind, is_cpu, tie, tolerance): `tracelens.model.nesting.nest` of a table whose CPU-side events
   (kind k with is_cpu[k]) start in time order, in one pass and no array per step: (parent int32, depth int32 per
   row, the CPU rows in nesting order (track, start, -end, tie[kind], row) as int64). None when the starts are
   not in order or a track or kind is out of range: the caller's numpy path then nests. Arrays: int64, int64,
   int32, int8, then uint8 and int8 per kind. */
static PyObject *nest(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 7) {
        PyErr_SetString(PyExc_TypeError, "nest(ts_ns, dur_ns, track, kind, is_cpu, tie, tolerance)");
        return NULL;
    }
    const long long tolerance = PyLong_AsLongLong(argv[6]);
    if (tolerance == -1 && PyErr_Occurred()) return NULL;
    Py_buffer views[6];
    static const Py_ssize_t sizes[6] = {8, 8, 4, 1, 1, 1};
    Py_ssize_t n = -1, n_kinds = -1, held = 0;
    PyObject *parent_buffer = NULL, *depth_buffer = NULL, *order_buffer = NULL, *result = NULL;
    int64_t *counts = NULL, *cand = NULL;
    for (; held < 6; held++)
        if (sized_buffer(argv[held], &views[held], sizes[held], held < 4 ? &n : &n_kinds) < 0) goto done;
    NestTable table = {views[0].buf, views[1].buf, views[3].buf, views[5].buf};
    const int32_t *track = views[2].buf;
    const uint8_t *is_cpu = views[4].buf;
    int32_t *parent, *depth;
    int64_t *order;
    if ((parent_buffer = new_buffer(n, 4, (char **)&parent)) == NULL) goto done;
    if ((depth_buffer = new_buffer(n, 4, (char **)&depth)) == NULL) goto done;
    Py_ssize_t n_cpu = 0;
    int64_t max_track = -1, last_start = INT64_MIN;
    for (Py_ssize_t i = 0; i < n; i++) {
        parent[i] = -1, depth[i] = 0;
        if (table.kind[i] < 0 || table.kind[i] >= n_kinds) goto refuse;
        if (!is_cpu[table.kind[i]]) continue;
        if (track[i] < 0 || track[i] > n || table.ts[i] < last_start) goto refuse;
        last_start = table.ts[i];
        max_track = track[i] > max_track ? track[i] : max_track;
        n_cpu++;
    }
    if ((order_buffer = new_buffer(n_cpu, 8, (char **)&order)) == NULL) goto done;
    counts = PyMem_Calloc((size_t)(max_track + 2), sizeof(int64_t));
    cand = PyMem_Malloc((size_t)(n_cpu > 0 ? n_cpu : 1) * sizeof(int64_t));
    if (counts == NULL || cand == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* a stable counting sort by track keeps each track's rows in time order */
    for (Py_ssize_t i = 0; i < n; i++)
        if (is_cpu[table.kind[i]]) counts[track[i] + 1]++;
    for (int64_t t = 0; t <= max_track; t++) counts[t + 1] += counts[t];
    for (Py_ssize_t i = 0; i < n; i++)
        if (is_cpu[table.kind[i]]) order[counts[track[i]]++] = i;
    if (sort_tied_runs(order, n_cpu, track, &table) < 0) goto done;
    for (Py_ssize_t p = 0; p < n_cpu; p++) { /* as `enclosing`, over positions in nesting order */
        int64_t row = order[p], start = table.ts[row], end = end_of(&table, row);
        int64_t c = (p > 0 && track[order[p - 1]] == track[row]) ? (int64_t)(p - 1) : -1;
        while (c >= 0) {
            int64_t end_c = end_of(&table, order[c]);
            if (encloses(end_c, start, end, tolerance)) break;
            c = cand[c];
        }
        cand[p] = c;
        if (c >= 0) {
            parent[row] = (int32_t)order[c];
            depth[row] = depth[order[c]] + 1;
        }
    }
    result = PyTuple_Pack(3, parent_buffer, depth_buffer, order_buffer);
    goto done;
refuse:
    result = Py_NewRef(Py_None);
done:
    for (Py_ssize_t b = 0; b < held; b++) PyBuffer_Release(&views[b]);
    Py_XDECREF(parent_buffer);
    Py_XDECREF(depth_buffer);
    Py_XDECREF(order_buffer);
    PyMem_Free(counts);
    PyMem_Free(cand);
    return result;
}

/* An int64 -> row map for `link`: a key is set once (its first row). Keys spanning a range no wider than a few
   times their number (ids count up: the usual case) index an array directly; others are hashed (open
   addressing, linear probing), where a probe longer than MAX_PROBES (crafted keys) makes the caller give up and
   numpy's sorted path link instead. */
#define MAX_PROBES 4096
typedef struct {
    int64_t base;  /* direct: the least key */
    int32_t *rows; /* direct: row per key - base; hashed: row per slot (-1: empty) */
    int64_t *keys; /* hashed only */
    size_t size;   /* direct: the range; hashed: slots (a power of 2) */
    int hashed;
} IntMap;

static inline uint64_t mix64(uint64_t x) { /* splitmix64's finaliser */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* A map for `count` keys in [least, greatest] (count 0: an empty map). */
static int intmap_init(IntMap *map, Py_ssize_t count, int64_t least, int64_t greatest) {
    uint64_t range = count ? (uint64_t)greatest - (uint64_t)least + 1 : 1;
    map->base = least;
    map->hashed = range > (uint64_t)count * 8 + 65536;
    map->size = 16;
    if (map->hashed)
        while (map->size < (size_t)count * 2) map->size <<= 1;
    else
        map->size = (size_t)range;
    map->rows = PyMem_Malloc(map->size * sizeof(int32_t));
    map->keys = map->hashed ? PyMem_Malloc(map->size * sizeof(int64_t)) : NULL;
    if (map->rows == NULL || (map->hashed && map->keys == NULL)) {
        PyErr_NoMemory();
        return -1;
    }
    memset(map->rows, 0xff, map->size * sizeof(int32_t)); /* -1 */
    return 0;
}

static void intmap_free(IntMap *map) {
    PyMem_Free(map->rows);
    PyMem_Free(map->keys);
}

/* Where `key` (within the range given at init when direct) is or would go: an index into `rows`; -1 past
   MAX_PROBES. */
static int64_t intmap_slot(const IntMap *map, int64_t key) {
    if (!map->hashed) return (int64_t)((uint64_t)key - (uint64_t)map->base);
    size_t mask = map->size - 1, slot = mix64((uint64_t)key) & mask;
    for (int probe = 0; probe < MAX_PROBES; probe++, slot = (slot + 1) & mask)
        if (map->rows[slot] < 0 || map->keys[slot] == key) return (int64_t)slot;
    return -1;
}

/* The row of `key` (-1: none; -2: past MAX_PROBES). */
static int64_t intmap_get(const IntMap *map, int64_t key) {
    if (!map->hashed && ((uint64_t)key - (uint64_t)map->base) >= map->size) return -1;
    int64_t slot = intmap_slot(map, key);
    return slot < 0 ? -2 : map->rows[slot];
}

/* Set `key` to `row` unless it is set; -1 past MAX_PROBES. */
static int intmap_add(IntMap *map, int64_t key, int32_t row) {
    int64_t slot = intmap_slot(map, key);
    if (slot < 0) return -1;
    if (map->rows[slot] < 0) {
        map->rows[slot] = row;
        if (map->hashed) map->keys[slot] = key;
    }
    return 0;
}

/* link(kind, correlation, external_id, ts_ns, dur_ns, track, parent, is_api, is_gpu, cpu_op, tolerance_ns):
   `tracelens.model.linking`'s launch and op columns in one pass each, by hashing instead of sorting: (launch
   int32, op int32, launches linked by External id, by containment); None when crafted ids defeat the hash (numpy
   then links). Arrays: int8, int64 x5, int32 x2 (track, parent), then uint8 per kind; `cpu_op` the kind code. */
static PyObject *link_events(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 11) {
        PyErr_SetString(PyExc_TypeError, "link(kind, correlation, external_id, ts_ns, dur_ns, track, parent, is_api, "
                                         "is_gpu, cpu_op, tolerance_ns)");
        return NULL;
    }
    Py_buffer views[9];
    static const Py_ssize_t sizes[9] = {1, 8, 8, 8, 8, 4, 4, 1, 1};
    Py_ssize_t n = -1, n_kinds = -1, held = 0;
    PyObject *launch_buffer = NULL, *op_buffer = NULL, *result = NULL;
    IntMap by_correlation = {0}, by_external_id = {0};
    long cpu_op = PyLong_AsLong(argv[9]);
    int64_t tolerance = PyLong_AsLongLong(argv[10]);
    if (PyErr_Occurred()) return NULL;
    for (; held < 9; held++)
        if (sized_buffer(argv[held], &views[held], sizes[held], held < 7 ? &n : &n_kinds) < 0) goto done;
    const int8_t *kind = views[0].buf;
    const int64_t *correlation = views[1].buf, *external_id = views[2].buf, *ts = views[3].buf, *dur = views[4].buf;
    const int32_t *track = views[5].buf, *parent = views[6].buf;
    const uint8_t *is_api = views[7].buf, *is_gpu = views[8].buf;
    int32_t *launch, *op;
    Py_ssize_t n_calls = 0, n_ids = 0, linked_by_id = 0, linked_by_time = 0;
    int64_t call_least = INT64_MAX, call_greatest = INT64_MIN, id_least = INT64_MAX, id_greatest = INT64_MIN;
    if (n >= INT32_MAX) goto refuse; /* rows are int32 */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (kind[i] < 0 || kind[i] >= n_kinds || parent[i] < -1 || parent[i] >= n) goto refuse;
        if (is_api[kind[i]] && correlation[i] >= 0) {
            n_calls++;
            call_least = correlation[i] < call_least ? correlation[i] : call_least;
            call_greatest = correlation[i] > call_greatest ? correlation[i] : call_greatest;
        } else if (kind[i] == cpu_op && external_id[i] >= 0) {
            n_ids++;
            id_least = external_id[i] < id_least ? external_id[i] : id_least;
            id_greatest = external_id[i] > id_greatest ? external_id[i] : id_greatest;
        }
    }
    if ((launch_buffer = new_buffer(n, 4, (char **)&launch)) == NULL) goto done;
    if ((op_buffer = new_buffer(n, 4, (char **)&op)) == NULL) goto done;
    if (intmap_init(&by_correlation, n_calls, call_least, call_greatest) < 0) goto done;
    if (intmap_init(&by_external_id, n_ids, id_least, id_greatest) < 0) goto done;
    for (Py_ssize_t i = 0; i < n; i++) { /* the first API call of each correlation, the first op of each id */
        launch[i] = -1, op[i] = -1;
        if (is_api[kind[i]] && correlation[i] >= 0) {
            if (intmap_add(&by_correlation, correlation[i], (int32_t)i) < 0) goto refuse;
        } else if (kind[i] == cpu_op && external_id[i] >= 0) {
            if (intmap_add(&by_external_id, external_id[i], (int32_t)i) < 0) goto refuse;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) { /* API calls: the op of their External id if it encloses them, else by time */
        if (!is_api[kind[i]]) continue;
        int64_t by_id = -1, by_time = parent[i];
        for (Py_ssize_t climbed = 0; by_time >= 0 && kind[by_time] != cpu_op; climbed++) {
            if (climbed > n) goto refuse; /* not a forest */
            by_time = parent[by_time];
        }
        if (external_id[i] >= 0 && n_ids) {
            int64_t c = intmap_get(&by_external_id, external_id[i]);
            if (c == -2) goto refuse;
            if (c >= 0 && track[c] == track[i] && ts[c] <= wrap_add(ts[i], tolerance) &&
                wrap_add(ts[i], dur[i]) <= wrap_add(wrap_add(ts[c], dur[c]), tolerance))
                by_id = c;
        }
        linked_by_id += by_id >= 0;
        linked_by_time += by_id < 0 && by_time >= 0;
        op[i] = (int32_t)(by_id >= 0 ? by_id : by_time);
    }
    for (Py_ssize_t i = 0; i < n; i++) { /* GPU activity: the API call of its correlation, and that call's op */
        if (!is_gpu[kind[i]] || correlation[i] < 0 || !n_calls) continue;
        int64_t call = intmap_get(&by_correlation, correlation[i]);
        if (call == -2) goto refuse;
        if (call >= 0) {
            launch[i] = (int32_t)call;
            op[i] = op[call];
        }
    }
    result = Py_BuildValue("(OOnn)", launch_buffer, op_buffer, linked_by_id, linked_by_time);
    goto done;
refuse:
    result = Py_NewRef(Py_None);
done:
    for (Py_ssize_t b = 0; b < held; b++) PyBuffer_Release(&views[b]);
    Py_XDECREF(launch_buffer);
    Py_XDECREF(op_buffer);
    intmap_free(&by_correlation);
    intmap_free(&by_external_id);
    return result;
}

/* step_of(ts_ns, kind, launch, is_cpu, step_start, step_end): `tracelens.model.steps.assign_steps` in one pass:
   each CPU-side event's step (the last step starting at or before it, if it has not ended), each GPU activity's
   its launch's (int32 bytearray). Arrays: int64, int8, int32, uint8 per kind, int64 x2 (steps by start). */
static PyObject *step_of(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 6) {
        PyErr_SetString(PyExc_TypeError, "step_of(ts_ns, kind, launch, is_cpu, step_start, step_end)");
        return NULL;
    }
    Py_buffer views[6];
    static const Py_ssize_t sizes[6] = {8, 1, 4, 1, 8, 8};
    Py_ssize_t n = -1, n_kinds = -1, n_steps = -1, held = 0;
    PyObject *step_buffer = NULL, *result = NULL;
    for (; held < 6; held++)
        if (sized_buffer(argv[held], &views[held], sizes[held], held < 3 ? &n : held < 4 ? &n_kinds : &n_steps) < 0)
            goto done;
    const int64_t *ts = views[0].buf, *start = views[4].buf, *end = views[5].buf;
    const int8_t *kind = views[1].buf;
    const int32_t *launch = views[2].buf;
    const uint8_t *is_cpu = views[3].buf;
    int32_t *step;
    if ((step_buffer = new_buffer(n, 4, (char **)&step)) == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (kind[i] < 0 || kind[i] >= n_kinds || launch[i] < -1 || launch[i] >= n) {
            PyErr_SetString(PyExc_ValueError, "a kind or launch out of range");
            goto done;
        }
        step[i] = -1;
        if (!is_cpu[kind[i]]) continue;
        Py_ssize_t low = 0, high = n_steps; /* the first step starting after ts[i] */
        while (low < high) {
            Py_ssize_t middle = low + (high - low) / 2;
            if (start[middle] <= ts[i]) low = middle + 1;
            else high = middle;
        }
        if (low > 0 && ts[i] < end[low - 1]) step[i] = (int32_t)(low - 1);
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (launch[i] >= 0) step[i] = step[launch[i]];
    result = Py_NewRef(step_buffer);
done:
    for (Py_ssize_t b = 0; b < held; b++) PyBuffer_Release(&views[b]);
    Py_XDECREF(step_buffer);
    return result;
}

/* replay(order, calls, gpu, step_start, end): one re-timing of a step's graph, the loop of
   tracelens.analyses.critical_path.replay (same integers, int64 arithmetic). `order`: int64 [2][n_order] (what: 0 a
   sync returns, 1 a call starts, 2 a GPU activity starts; node). `calls`: int64 [6][n_calls] (previous call of the
   thread or -1, CPU work before the call, its length, observed start, observed length, awaited activity or -1).
   `gpu`: int64 [12][n_gpu] (observed start, observed length, length in this replay, binding, offset, launch_min,
   queued, launch, launch_shift, stream, stream_shift, cross; see `GpuConstraints`). `end`: the walk's END marker.
   Returns 10 int64 bytearrays: per call its start, end, own part (0 cpu, 1 sync), own predecessor, own ns; per
   activity its start, end, part (0 other_wait, 1 queued, 2 launch_latency, 3 gpu_gap, -1 not replayed),
   predecessor, ns. An index
   out of range raises ValueError. */
static PyObject *replay(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 5) {
        PyErr_SetString(PyExc_TypeError, "replay(order, calls, gpu, step_start, end)");
        return NULL;
    }
    const long long step_start = PyLong_AsLongLong(argv[3]);
    if (step_start == -1 && PyErr_Occurred()) return NULL;
    const long long end_marker = PyLong_AsLongLong(argv[4]);
    if (end_marker == -1 && PyErr_Occurred()) return NULL;
    Py_buffer views[3];
    Py_ssize_t lengths[3] = {-1, -1, -1};
    static const Py_ssize_t rows[3] = {2, 6, 12};
    int held = 0;
    PyObject *out[10] = {NULL};
    PyObject *result = NULL;
    for (; held < 3; held++) {
        if (int64_buffer(argv[held], &views[held], &lengths[held]) < 0) goto done;
        if (lengths[held] % rows[held] != 0) {
            held++;
            PyErr_SetString(PyExc_ValueError, "replay: an array of the wrong shape");
            goto done;
        }
    }
    const Py_ssize_t n_order = lengths[0] / 2, n_calls = lengths[1] / 6, n_gpu = lengths[2] / 12;
    const int64_t *what = views[0].buf, *node = what + n_order;
    const int64_t *call = views[1].buf;
    const int64_t *prev = call, *work = call + n_calls, *dur = call + 2 * n_calls, *obs_start = call + 3 * n_calls,
                  *obs_dur = call + 4 * n_calls, *awaited = call + 5 * n_calls;
    const int64_t *g = views[2].buf;
    const int64_t *g_obs = g, *g_obs_len = g + n_gpu, *g_len = g + 2 * n_gpu, *binding = g + 3 * n_gpu,
                  *offset = g + 4 * n_gpu, *launch_min = g + 5 * n_gpu, *queued = g + 6 * n_gpu,
                  *launch = g + 7 * n_gpu, *launch_shift = g + 8 * n_gpu, *stream = g + 9 * n_gpu,
                  *stream_shift = g + 10 * n_gpu, *cross = g + 11 * n_gpu;
    int64_t *data[10];
    for (int b = 0; b < 10; b++)
        if ((out[b] = new_buffer(b < 5 ? n_calls : n_gpu, 8, (char **)&data[b])) == NULL) goto done;
    int64_t *c_start = data[0], *c_end = data[1], *own_part = data[2], *own_pred = data[3], *own_ns = data[4];
    int64_t *g_start = data[5], *g_end = data[6], *g_part = data[7], *g_pred = data[8], *g_ns = data[9];
    for (Py_ssize_t i = 0; i < n_calls; i++) {
        if (prev[i] < -1 || prev[i] >= n_calls || awaited[i] < -1 || awaited[i] >= n_gpu) goto out_of_range;
        c_start[i] = c_end[i] = 0;
        own_part[i] = 0, own_pred[i] = end_marker, own_ns[i] = dur[i]; /* CPU: the call's own length */
    }
    for (Py_ssize_t k = 0; k < n_gpu; k++) {
        if (launch[k] < -1 || launch[k] >= n_calls || stream[k] < -1 || stream[k] >= n_gpu || cross[k] < -1 ||
            cross[k] >= n_gpu)
            goto out_of_range;
        g_start[k] = g_end[k] = g_ns[k] = 0;
        g_part[k] = -1; /* not replayed (no order entry) */
        g_pred[k] = end_marker;
    }
    for (Py_ssize_t o = 0; o < n_order; o++) {
        const int64_t i = node[o];
        if (i < 0 || i >= (what[o] == 2 ? n_gpu : n_calls)) goto out_of_range;
        if (what[o] == 2) {
            const int64_t b = binding[i];
            int64_t start;
            if (b < 0) { /* launched outside the step's calls and first on its lane: its observed start */
                start = g_obs[i];
                g_part[i] = 0, g_pred[i] = end_marker, g_ns[i] = wrap_add(start, wrap_neg(step_start));
            } else if (b == 3) { /* behind earlier steps' work on its stream: fixed */
                start = wrap_add(queued[i], offset[i]);
                g_part[i] = 1, g_pred[i] = end_marker, g_ns[i] = wrap_add(start, wrap_neg(step_start));
            } else {
                const int64_t lp = launch[i], sp = stream[i], xp = cross[i];
                const int64_t at_launch = lp >= 0 ? wrap_add(c_start[lp], wrap_neg(launch_shift[i])) : 0;
                const int64_t at_stream = sp >= 0 ? wrap_add(g_end[sp], wrap_neg(stream_shift[i])) : 0;
                const int64_t at_cross = xp >= 0 ? g_end[xp] : 0;
                int64_t base, part, pred;
                if (b == 0) base = at_launch, part = 2, pred = lp;
                else if (b == 1) base = at_stream, part = 3, pred = ~sp;
                else base = at_cross, part = 3, pred = ~xp;
                start = wrap_add(base, offset[i]);
                if (lp >= 0 && wrap_add(at_launch, launch_min[i]) > start) start = wrap_add(at_launch, launch_min[i]);
                if (sp >= 0 && at_stream > start) start = at_stream;
                if (xp >= 0 && at_cross > start) start = at_cross;
                if (queued[i] > start) start = queued[i];
                g_part[i] = part, g_pred[i] = pred, g_ns[i] = wrap_add(start, wrap_neg(base));
            }
            g_start[i] = start;
            g_end[i] = wrap_add(start, g_len[i]);
        } else if (what[o] == 1) { /* a call starts after the CPU work since its thread's previous call */
            c_start[i] = wrap_add(prev[i] >= 0 ? c_end[prev[i]] : step_start, work[i]);
            c_end[i] = wrap_add(c_start[i], dur[i]); /* a sync's end is settled when it returns */
        } else { /* a sync returns after the activity it awaited plus the observed return time */
            const int64_t a = awaited[i];
            if (a < 0) continue; /* nothing awaited: its observed length (set when it started) */
            const int64_t after =
                wrap_add(wrap_add(obs_start[i], obs_dur[i]), wrap_neg(wrap_add(g_obs[a], g_obs_len[a])));
            if (wrap_add(g_end[a], after) >= c_start[i]) {
                c_end[i] = wrap_add(g_end[a], after);
                own_part[i] = 1, own_pred[i] = ~a, own_ns[i] = after;
            } else { /* the awaited work finished before the sync was reached: it returns at once */
                c_end[i] = wrap_add(c_start[i], after < obs_dur[i] ? after : obs_dur[i]);
                own_part[i] = 1, own_pred[i] = end_marker, own_ns[i] = wrap_add(c_end[i], wrap_neg(c_start[i]));
            }
        }
    }
    result = PyTuple_New(10);
    if (result == NULL) goto done;
    for (int b = 0; b < 10; b++) PyTuple_SET_ITEM(result, b, Py_NewRef(out[b]));
    goto done;
out_of_range:
    PyErr_SetString(PyExc_ValueError, "replay: an index out of range");
done:
    for (int b = 0; b < held; b++) PyBuffer_Release(&views[b]);
    for (int b = 0; b < 10; b++) Py_XDECREF(out[b]);
    return result;
}

/* Add `value` to the sum of `key` (an index below `n_keys`), noting the key in order of first addition (`order`,
   `count`; `position`: n_keys entries, -1 for a key not seen yet). 0 when the sum would not fit int64. */
static int add_to(int64_t key, int64_t value, int64_t *position, int64_t *order, int64_t *sums, Py_ssize_t *count) {
    if (position[key] < 0) {
        position[key] = *count;
        order[*count] = key, sums[*count] = 0;
        (*count)++;
    }
    return !__builtin_add_overflow(sums[position[key]], value, &sums[position[key]]);
}

/* walk(node, calls, gpu, end, latency, launch_part, other_part, n_parts, n_codes, limit): the walk of
   tracelens.analyses.critical_path._walk over one replay's edges, from `node` (a call's end when >= 0, activity k
   when ~k) back along binding constraints until `end` or until `limit` ns are walked (the stretch it runs out in
   taken in part; a launch edge's latency lies after what exceeds it), at most 2 x (calls + activities) + 2 steps. `calls`: int64
   [6][n_calls] (the node a call's start is reached from and its ns; the part, predecessor and ns of the call's own
   time; its event row). `gpu`: int64 [9][n_gpu] (replayed start and end; part, predecessor and ns of how its start
   was reached; event row; its category's part; name code; op code). Parts are indices below `n_parts`
   (`launch_part`: launch latency, of which what exceeds `latency` goes to `other_part`); codes lie in
   [-1, n_codes - 1). Returns 7 int64 bytearrays: the rows visited, in order; the parts in order of first addition
   and their sums; the name codes and their ns, likewise; the op codes and their ns, likewise. None where an index,
   part or code is out of range or a sum would not fit int64 (the Python walk answers). */
static PyObject *walk(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 10) {
        PyErr_SetString(PyExc_TypeError,
                        "walk(node, calls, gpu, end, latency, launch_part, other_part, n_parts, n_codes, limit)");
        return NULL;
    }
    long long scalars[8];
    static const int scalar_args[8] = {0, 3, 4, 5, 6, 7, 8, 9};
    for (int a = 0; a < 8; a++) {
        scalars[a] = PyLong_AsLongLong(argv[scalar_args[a]]);
        if (scalars[a] == -1 && PyErr_Occurred()) return NULL;
    }
    int64_t node = scalars[0];
    const int64_t end_marker = scalars[1], latency = scalars[2], launch_part = scalars[3], other_part = scalars[4];
    const int64_t n_parts = scalars[5], n_codes = scalars[6];
    int64_t left = scalars[7];
    if (n_parts < 0 || n_codes < 0 || n_parts > (1 << 20) || n_codes > (1 << 22)) Py_RETURN_NONE; /* a few names */
    Py_buffer views[2];
    Py_ssize_t lengths[2] = {-1, -1};
    int held = 0;
    PyObject *out[7] = {NULL};
    PyObject *result = NULL;
    int64_t *scratch = NULL;
    for (; held < 2; held++) {
        if (int64_buffer(argv[1 + held], &views[held], &lengths[held]) < 0) goto done;
        if (lengths[held] % (held == 0 ? 6 : 9) != 0) {
            held++;
            PyErr_SetString(PyExc_ValueError, "walk: an array of the wrong shape");
            goto done;
        }
    }
    const Py_ssize_t n_calls = lengths[0] / 6, n_gpu = lengths[1] / 9, steps = 2 * (n_calls + n_gpu) + 2;
    const int64_t *c = views[0].buf, *g = views[1].buf;
    const int64_t *start_pred = c, *start_ns = c + n_calls, *own_part = c + 2 * n_calls, *own_pred = c + 3 * n_calls,
                  *own_ns = c + 4 * n_calls, *call_row = c + 5 * n_calls;
    const int64_t *g_start = g, *g_end = g + n_gpu, *g_part = g + 2 * n_gpu, *g_pred = g + 3 * n_gpu,
                  *g_ns = g + 4 * n_gpu, *gpu_row = g + 5 * n_gpu, *category = g + 6 * n_gpu, *name = g + 7 * n_gpu,
                  *op = g + 8 * n_gpu;
    /* per key set (parts, names + 1, ops + 1): the position of each key, the keys in order and their sums (room for
       every part; a step adds one name and one op at most) */
    const int64_t n_keys[3] = {n_parts, n_codes + 1, n_codes + 1};
    int64_t room[3];
    size_t total = 0;
    for (int set = 0; set < 3; set++) {
        room[set] = set == 0 || n_keys[set] < steps ? n_keys[set] : steps;
        total += (size_t)n_keys[set] + 2 * (size_t)room[set];
    }
    scratch = PyMem_Malloc((total ? total : 1) * sizeof(int64_t) + (size_t)steps * sizeof(int64_t));
    if (scratch == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t *position[3], *order[3], *sums[3];
    Py_ssize_t count[3] = {0, 0, 0};
    int64_t *cursor = scratch;
    for (int set = 0; set < 3; set++) {
        position[set] = cursor, cursor += n_keys[set];
        order[set] = cursor, cursor += room[set];
        sums[set] = cursor, cursor += room[set];
        for (int64_t k = 0; k < n_keys[set]; k++) position[set][k] = -1;
    }
    int64_t *rows = cursor;
    Py_ssize_t n_rows = 0;
    int at_start = 0, ok = 1;
    for (Py_ssize_t step = 0; step < steps && ok && node != end_marker && left > 0; step++) {
        if (node >= 0) {
            if (node >= n_calls) goto python;
            if (!at_start) { /* a call entered at its end: its own time */
                rows[n_rows++] = call_row[node];
                if (own_part[node] < 0 || own_part[node] >= n_parts) goto python;
                const int64_t taken = own_ns[node] < left ? own_ns[node] : left;
                ok = add_to(own_part[node], taken, position[0], order[0], sums[0], &count[0]);
                left -= taken;
                if (own_pred[node] != end_marker) node = own_pred[node]; /* a sync that waited for GPU work */
                else at_start = 1;
            } else { /* entered at its start: the CPU work before it (part 0) */
                const int64_t taken = start_ns[node] < left ? start_ns[node] : left;
                ok = add_to(0, taken, position[0], order[0], sums[0], &count[0]);
                left -= taken;
                node = start_pred[node], at_start = 0;
            }
            continue;
        }
        const int64_t k = ~node;
        if (k >= n_gpu || g_part[k] < 0 || g_part[k] >= n_parts || category[k] < 0 || category[k] >= n_parts ||
            name[k] < -1 || name[k] >= n_codes || op[k] < -1 || op[k] >= n_codes || other_part < 0 ||
            other_part >= n_parts)
            goto python;
        rows[n_rows++] = gpu_row[k];
        int64_t duration, ns = g_ns[k];
        ok = !__builtin_sub_overflow(g_end[k], g_start[k], &duration);
        if (ok && duration > left) duration = left;
        ok = ok && add_to(category[k], duration, position[0], order[0], sums[0], &count[0]) &&
             add_to(name[k] + 1, duration, position[1], order[1], sums[1], &count[1]) &&
             add_to(op[k] + 1, duration, position[2], order[2], sums[2], &count[2]);
        left -= duration;
        if (left <= 0) break;
        if (ok && g_part[k] == launch_part && ns > latency) { /* beyond the usual latency: unexplained */
            int64_t beyond;
            const int64_t usual = latency < left ? latency : left;
            ok = !__builtin_sub_overflow(ns, latency, &beyond);
            if (ok && beyond > left - usual) beyond = left - usual;
            ok = ok && add_to(other_part, beyond, position[0], order[0], sums[0], &count[0]);
            left -= beyond;
            ns = usual;
        }
        if (ns > left) ns = left;
        ok = ok && add_to(g_part[k], ns, position[0], order[0], sums[0], &count[0]);
        left -= ns;
        at_start = g_part[k] == launch_part; /* a launch edge enters the call at its start */
        node = g_pred[k];
    }
    if (!ok) goto python;
    for (int set = 0; set < 3; set++)
        for (Py_ssize_t i = 0; i < count[set]; i++) order[set][i] -= set > 0; /* codes were stored + 1 */
    const int64_t *columns[7] = {rows, order[0], sums[0], order[1], sums[1], order[2], sums[2]};
    const Py_ssize_t sizes[7] = {n_rows, count[0], count[0], count[1], count[1], count[2], count[2]};
    for (int b = 0; b < 7; b++) {
        char *data;
        if ((out[b] = new_buffer(sizes[b], 8, &data)) == NULL) goto done;
        if (sizes[b]) memcpy(data, columns[b], (size_t)sizes[b] * sizeof(int64_t));
    }
    result = PyTuple_New(7);
    if (result == NULL) goto done;
    for (int b = 0; b < 7; b++) PyTuple_SET_ITEM(result, b, Py_NewRef(out[b]));
    goto done;
python:
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(scratch);
    for (int b = 0; b < held; b++) PyBuffer_Release(&views[b]);
    for (int b = 0; b < 7; b++) Py_XDECREF(out[b]);
    return result;
}

/* drop_empty_items(buffer, start, end) -> (new_end, dropped) or None: the twin of
   tracelens.loader.compact.python_drop_empty_items (same bytes, same counts; the tests compare them).
   buffer[start:end] is the text of a range of trace events: JSON values separated by commas, then, in the
   last range only, the `]` that closes the event list and the rest of the document. In place, each empty
   object `{ }` among those values is removed, the values kept are joined by single commas (whitespace between
   them dropped), and everything from the closing `]` on is moved down unchanged; returns the new end of the
   text and the number of values removed. Values are delimited by tracking strings (with escapes) and
   brackets; None (the buffer untouched up to the point reached, so the caller must not decode it) when the
   text is not a comma-separated run of values, which means it is not valid JSON either. */
static int is_json_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* The index just past the JSON value that starts at s[i], or -1 when it does not end before `end`. */
static Py_ssize_t value_end(const char *s, Py_ssize_t i, Py_ssize_t end) {
    char c = s[i];
    if (c == '{' || c == '[') {
        Py_ssize_t depth = 0;
        for (Py_ssize_t j = i; j < end; j++) {
            char d = s[j];
            if (d == '"') {
                for (j++; j < end && s[j] != '"'; j++)
                    if (s[j] == '\\') j++;
                if (j >= end) return -1;
            } else if (d == '{' || d == '[') {
                depth++;
            } else if (d == '}' || d == ']') {
                if (--depth == 0) return j + 1;
            }
        }
        return -1;
    }
    if (c == '"') {
        Py_ssize_t j = i + 1;
        for (; j < end && s[j] != '"'; j++)
            if (s[j] == '\\') j++;
        return j < end ? j + 1 : -1;
    }
    Py_ssize_t j = i;
    while (j < end && s[j] != ',' && s[j] != ']' && s[j] != '}' && s[j] != '{' && s[j] != '[' && s[j] != '"' &&
           !is_json_space(s[j]))
        j++;
    return j > i ? j : -1;
}

static PyObject *drop_empty_items(PyObject *self, PyObject *const *argv, Py_ssize_t argc) {
    (void)self;
    if (argc != 3) {
        PyErr_SetString(PyExc_TypeError, "drop_empty_items(buffer, start, end)");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(argv[0], &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return NULL;
    const Py_ssize_t start = PyLong_AsSsize_t(argv[1]), end = PyLong_AsSsize_t(argv[2]);
    PyObject *result = NULL;
    if (PyErr_Occurred()) goto done;
    if (start < 0 || end < start || end > view.len) {
        PyErr_SetString(PyExc_ValueError, "drop_empty_items: a range outside the buffer");
        goto done;
    }
    char *s = view.buf;
    Py_ssize_t r = start, w = start, dropped = 0, kept = 0;
    int first = 1;
    for (;;) {
        while (r < end && is_json_space(s[r])) r++;
        if (r >= end) break;
        if (s[r] == ']') { /* the end of the event list: the rest stays as it is */
            memmove(s + w, s + r, (size_t)(end - r));
            w += end - r;
            break;
        }
        if (!first) {
            if (s[r] != ',') goto not_values;
            for (r++; r < end && is_json_space(s[r]); r++) {
            }
            if (r >= end) goto not_values;
        }
        first = 0;
        const Py_ssize_t stop = value_end(s, r, end);
        if (stop < 0) goto not_values;
        int empty = s[r] == '{' && s[stop - 1] == '}';
        for (Py_ssize_t j = r + 1; empty && j < stop - 1; j++) empty = is_json_space(s[j]);
        if (empty) {
            dropped++;
        } else {
            if (kept++) s[w++] = ',';
            memmove(s + w, s + r, (size_t)(stop - r));
            w += stop - r;
        }
        r = stop;
    }
    result = Py_BuildValue("(nn)", w, dropped);
    goto done;
not_values:
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef METHODS[] = {
    {"drop_empty_items", (PyCFunction)(void (*)(void))drop_empty_items, METH_FASTCALL,
     "drop_empty_items(buffer, start, end) -> (new_end, dropped) or None; see the C source."},
    {"permute", (PyCFunction)(void (*)(void))permute, METH_FASTCALL,
     "permute(order, columns) -> None: column[:] = column[order] in place for each column; see the C source."},
    {"nest", (PyCFunction)(void (*)(void))nest, METH_FASTCALL,
     "nest(ts_ns, dur_ns, track, kind, is_cpu, tie, tolerance) -> (parent, depth, cpu rows in nesting order) or None; "
     "see the "
     "C source."},
    {"link", (PyCFunction)(void (*)(void))link_events, METH_FASTCALL,
     "link(kind, correlation, external_id, ts_ns, dur_ns, track, parent, is_api, is_gpu, cpu_op, tolerance_ns) -> "
     "(launch, op, by_id, by_time) or None; see the C source."},
    {"step_of", (PyCFunction)(void (*)(void))step_of, METH_FASTCALL,
     "step_of(ts_ns, kind, launch, is_cpu, step_start, step_end) -> step int32 bytearray; see the C source."},
    {"enclosing", (PyCFunction)(void (*)(void))enclosing, METH_FASTCALL,
     "enclosing(start, end, track, tolerance) -> (cand int64 bytearray, depth int32 bytearray); see the C source."},
    {"memory_columns", (PyCFunction)(void (*)(void))memory_columns, METH_FASTCALL,
     "memory_columns(events, instant_types, args_type, memory_name, counter_type, meta_type) -> (ts, ints, pair_codes, "
     "pairs, has_counters, has_meta); see the C source."},
    {"replay", (PyCFunction)(void (*)(void))replay, METH_FASTCALL,
     "replay(order, calls, gpu, step_start, end) -> 10 int64 bytearrays; see the C source."},
    {"walk", (PyCFunction)(void (*)(void))walk, METH_FASTCALL,
     "walk(node, calls, gpu, end, latency, launch_part, other_part, n_parts, n_codes, limit) -> 7 int64 bytearrays "
     "or None; "
     "see the C source."},
    {"columns", (PyCFunction)(void (*)(void))columns, METH_FASTCALL,
     "columns(events, event_type, args_type, raw_type, select) -> (cat_codes, cat_values, name_codes, name_values, "
     "pid_codes, pid_values, tid_codes, tid_values, ts_us, dur_us, ints, dims, raws); see the module docstring."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_native",
                                    "tracelens' C extension: see tracelens/native.py.", -1, METHODS,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&MODULE); }
