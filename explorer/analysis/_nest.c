/* Slice nesting's sequential pass (explorer.model.nesting._stack_pass), compiled: one stack per thread over
 * the slices in nesting order. Loaded through ctypes by explorer.model.native; built with the events reader
 * by hatch_build.py. It holds no state between calls and takes no lock (ctypes drops the GIL in a call).
 */
#include <stdint.h>

#define NEST_ABI 1

/* order: the slices to nest, by thread then nesting order; thread, ts, dur: per raw index. Writes parent[]
 * of each slice of order (-1: none or displaced) and the displaced ones (their start inside the stack's top
 * and their end after it) to displaced[], returned as a count; on the last row (`last_row`) none is
 * displaced: the slice goes to the top level instead. stack_end, stack_idx: scratch of len(order). */
int64_t nest_stack(int64_t n, const int64_t *order, const int64_t *thread, const int64_t *ts, const int64_t *dur,
                   int64_t *parent, int64_t *displaced, int64_t last_row, int64_t *stack_end, int64_t *stack_idx) {
    int64_t top = 0, moved = 0, cur = 0;
    for (int64_t k = 0; k < n; k++) {
        int64_t i = order[k];
        if (k == 0 || thread[i] != cur) {
            cur = thread[i];
            top = 0;
        }
        int64_t s = ts[i], e = ts[i] + dur[i];
        while (top > 0 && stack_end[top - 1] <= s) top--;
        if (top > 0 && stack_end[top - 1] < e) {
            if (!last_row) {
                parent[i] = -1;
                displaced[moved++] = i;
                continue;
            }
            top = 0; /* too many overlapping rows: the slice stays, at the top level of the last row */
        }
        parent[i] = top > 0 ? stack_idx[top - 1] : -1;
        stack_end[top] = e;
        stack_idx[top] = i;
        top++;
    }
    return moved;
}

int64_t nest_abi(void) { return NEST_ABI; }
