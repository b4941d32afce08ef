/* Generated from tracelens/loader/fields.py (EVENT_ATTRS) and schema.py (Args: INT_ARGS, DIM_ARGS,
   RAW_ARGS) by scripts/gen_native_fields.py: do not edit. The slots of these fields are read in this
   order. */
#ifndef TRACELENS_NATIVE_FIELDS_H
#define TRACELENS_NATIVE_FIELDS_H
#define N_EVENT_FIELDS 7
static const char *EVENT_FIELDS[N_EVENT_FIELDS] = {"cat", "name", "pid", "tid", "ts", "dur", "args"};
#define N_INT_FIELDS 7
static const char *INT_FIELDS[N_INT_FIELDS] = {"external_id", "external_id_legacy", "correlation", "sequence_number", "device", "stream", "bytes"};
#define N_DIM_FIELDS 2
static const char *DIM_FIELDS[N_DIM_FIELDS] = {"grid", "block"};
#define N_RAW_FIELDS 4
static const char *RAW_FIELDS[N_RAW_FIELDS] = {"input_dims", "input_type", "concrete_inputs", "input_strides"};
enum { F_CAT, F_NAME, F_PID, F_TID, F_TS, F_DUR, F_ARGS };
#endif
