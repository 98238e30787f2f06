/* Error, outcome and phase names: each table in core.h generates its names. */
#include <streamguard/core.h>

#include <string.h>

const char *sg_version(void) {
    return SG_VERSION_STRING;
}

const char *sg_strerror(int err) {
    switch (err) {
    case 0:
        return "success";
#define SG__ERR_TEXT(name, value, text) \
    case (value):                       \
        return text;
        SG_ERRNO_MAP(SG__ERR_TEXT)
#undef SG__ERR_TEXT
    default:
        return "unknown error";
    }
}

const char *sg_errname(int err) {
    switch (err) {
    case 0:
        return "OK";
#define SG__ERR_NAME(name, value, text) \
    case (value):                       \
        return #name;
        SG_ERRNO_MAP(SG__ERR_NAME)
#undef SG__ERR_NAME
    default:
        return "UNKNOWN";
    }
}

static const char *const outcome_names[SG_OUTCOME_COUNT_] = {
#define SG__OUTCOME_TEXT(name, text) text,
    SG_OUTCOME_MAP(SG__OUTCOME_TEXT)
#undef SG__OUTCOME_TEXT
};

static const char *const phase_names[SG_PHASE_COUNT_] = {
#define SG__PHASE_TEXT(name, text) text,
    SG_PHASE_MAP(SG__PHASE_TEXT)
#undef SG__PHASE_TEXT
};

const char *sg_outcome_name(sg_outcome outcome) {
    if (outcome == SG_OUTCOME_NONE) {
        return "none";
    }
    if ((unsigned)outcome >= (unsigned)SG_OUTCOME_COUNT_) {
        return NULL;
    }
    return outcome_names[outcome];
}

const char *sg_phase_name(sg_phase phase) {
    if (phase == SG_PHASE_NONE) {
        return "none";
    }
    if ((unsigned)phase >= (unsigned)SG_PHASE_COUNT_) {
        return NULL;
    }
    return phase_names[phase];
}

int sg_outcome_from_name(const char *name, sg_outcome *out) {
    if (name == NULL || out == NULL) {
        return SG_EINVAL;
    }
    for (int i = 0; i < SG_OUTCOME_COUNT_; i++) {
        if (strcmp(name, outcome_names[i]) == 0) {
            *out = (sg_outcome)i;
            return 0;
        }
    }
    return SG_EINVAL;
}

int sg_phase_from_name(const char *name, sg_phase *out) {
    if (name == NULL || out == NULL) {
        return SG_EINVAL;
    }
    for (int i = 0; i < SG_PHASE_COUNT_; i++) {
        if (strcmp(name, phase_names[i]) == 0) {
            *out = (sg_phase)i;
            return 0;
        }
    }
    return SG_EINVAL;
}

bool sg_outcome_is_timeout(sg_outcome outcome) {
    switch (outcome) {
    case SG_OUTCOME_CONNECT_TIMEOUT:
    case SG_OUTCOME_FIRST_ITEM_TIMEOUT:
    case SG_OUTCOME_IDLE_TIMEOUT:
    case SG_OUTCOME_STREAM_TIMEOUT:
    case SG_OUTCOME_ATTEMPT_TIMEOUT:
    case SG_OUTCOME_BUDGET_EXHAUSTED:
        return true;
    default:
        return false;
    }
}
