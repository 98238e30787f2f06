/* A tiny program that uses an installed streamguard, built by the install test. */
#include <stdio.h>
#include <string.h>

#include <streamguard/streamguard.h>

int main(void) {
    sg_budget budget;
    sg_guard_config cfg;
    sg_guard guard;
    sg_guard_result result;
    int64_t now = SG_SEC(1);

    if (sg_budget_start(&budget, now, SG_MS(500), SG_MS(10)) != 0) {
        return 1;
    }
    sg_guard_config_init(&cfg);
    if (sg_guard_config_set_first_item(&cfg, SG_MS(100)) != 0 ||
        sg_guard_start(&guard, &cfg, &budget, now) != 0) {
        return 1;
    }
    if (sg_guard_finish(&guard, now + SG_MS(150), false, &result) != 0) {
        return 1;
    }
    printf("%s %s\n", sg_version(), sg_outcome_name(result.outcome));
    return strcmp(sg_outcome_name(result.outcome), "first_item_timeout") == 0 ? 0 : 1;
}
