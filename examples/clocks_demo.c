/*
 * clocks_demo - the core's three clocks on scripted streams, driven by hand.
 *
 * Each scenario is a script of what a server sends and when (an item, a
 * keepalive comment, a clean end, a dropped connection).  The demo plays it
 * through an sg_guard exactly as an event loop would: before each arrival it
 * asks the guard for its next deadline, and if that deadline comes first the
 * timer "fires" there.  Time is simulated, so the run takes microseconds and
 * shows what each clock concludes.
 */
#include <stdio.h>

#include <streamguard/streamguard.h>

enum kind { ITEM, KEEPALIVE, END_CLEAN, END_DROP, REPEAT_ITEMS };

struct step {
    int at_ms;      /* when it arrives, from attempt start */
    enum kind kind; /* REPEAT_ITEMS: one item every at_ms, forever */
};

struct scenario {
    const char *name;
    struct step steps[8];
    int nsteps;
};

static const struct scenario scenarios[] = {
    {"normal stream", {{80, ITEM}, {130, ITEM}, {180, ITEM}, {200, END_CLEAN}}, 4},
    {"slow first item", {{900, ITEM}, {950, END_CLEAN}}, 2},
    {"stall after 2 items", {{50, ITEM}, {100, ITEM}, {5000, ITEM}}, 3},
    {"keepalive trickle",
     {{50, ITEM},
      {100, KEEPALIVE},
      {150, KEEPALIVE},
      {200, KEEPALIVE},
      {250, KEEPALIVE},
      {300, KEEPALIVE},
      {350, KEEPALIVE},
      {400, ITEM}},
     8},
    {"runaway generation", {{10, REPEAT_ITEMS}}, 1},
    {"dropped after 2", {{50, ITEM}, {100, ITEM}, {120, END_DROP}}, 3},
    {"budget tighter", {{50, ITEM}, {199, ITEM}, {348, ITEM}, {497, ITEM}}, 4},
};

static void play(const struct scenario *sc) {
    const int64_t t0 = SG_SEC(100);
    sg_budget budget;
    sg_guard_config cfg;
    sg_guard guard;
    sg_guard_result r;

    /* One operation budget; the three clocks nested under it. */
    int64_t total = sc == &scenarios[6] ? SG_MS(400) : SG_SEC(2);
    sg_budget_start(&budget, t0, total, SG_MS(10));
    sg_guard_config_init(&cfg);
    sg_guard_config_set_first_item_timeout(&cfg, SG_MS(500));
    sg_guard_config_set_idle_timeout(&cfg, SG_MS(200));
    sg_guard_config_set_stream_timeout(&cfg, SG_SEC(1));
    sg_guard_config_set_max_items(&cfg, 50);
    sg_guard_start(&guard, &cfg, &budget, t0);
    sg_guard_set_phase(&guard, SG_PHASE_WAIT_FIRST_ITEM, t0);

    bool ended = false;
    for (int i = 0; i < sc->nsteps && !ended; i++) {
        const struct step *s = &sc->steps[i];
        for (int rep = 1; !ended; rep++) {
            int64_t at = t0 + SG_MS(s->kind == REPEAT_ITEMS ? s->at_ms * rep : s->at_ms);
            /* The event loop's one timer: does it fire before the arrival? */
            int64_t deadline = sg_guard_next_deadline(&guard);
            if (deadline <= at) {
                sg_guard_finish(&guard, deadline, false, &r);
                ended = true;
                break;
            }
            int rv = 0;
            switch (s->kind) {
            case ITEM:
            case REPEAT_ITEMS:
                sg_guard_on_bytes(&guard, at, 240);
                rv = sg_guard_on_item(&guard, at);
                break;
            case KEEPALIVE:
                rv = sg_guard_on_bytes(&guard, at, 13); /* ": keepalive\n\n" */
                break;
            case END_CLEAN:
            case END_DROP:
                sg_guard_finish(&guard, at, s->kind == END_CLEAN, &r);
                ended = true;
                break;
            default:
                break;
            }
            if (rv != 0) {
                sg_guard_finish(&guard, at, false, &r);
                ended = true;
            }
            if (s->kind != REPEAT_ITEMS) {
                break;
            }
        }
    }
    if (!ended) {
        sg_guard_finish(&guard, sg_guard_next_deadline(&guard), false, &r);
    }
    char ttfi[32] = "-";
    if (r.first_item_ns >= 0) {
        snprintf(ttfi, sizeof(ttfi), "%lld", (long long)(r.first_item_ns / SG_MS(1)));
    }
    printf("%-22s %-20s %-16s %-7s %5llu %8s %8lld\n", sc->name,
           sg_outcome_name(r.outcome), sg_phase_name(r.phase), r.partial ? "yes" : "no",
           (unsigned long long)r.items, ttfi, (long long)(r.elapsed_ns / SG_MS(1)));
}

int main(void) {
    printf("streamguard %s - clocks: first-item 500ms, idle 200ms, stream-total 1s,\n"
           "max 50 items; budget 2s (400ms in the last row), floor 10ms.\n\n",
           sg_version());
    printf("%-22s %-20s %-16s %-7s %5s %8s %8s\n", "scenario", "outcome", "phase",
           "partial", "items", "ttfi_ms", "elapsed");
    for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
        play(&scenarios[i]);
    }
    return 0;
}
