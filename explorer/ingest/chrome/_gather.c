/* Text columns put in another order (explorer.ingest.gather.take_text), compiled: out[k] = in[index[k]] over the
 * chunks of an Arrow string column (int32 offsets). Arrow's own take appends value by value through a builder
 * (~120-300 ns a value measured on the args column); this is two passes of plain loads and copies. Loaded
 * through ctypes by explorer.model.native; built with the other helpers by hatch_build.py. No state, no lock.
 */
#include <stdint.h>
#include <string.h>

#define GATHER_ABI 1

/* chunk[k], local[k]: which chunk value k comes from and its index there. offsets[c]: chunk c's offsets (its
 * first value's at [0]); data[c]: its value bytes (offsets are absolute into them). The bytes the n values
 * take together. */
int64_t gather_bytes(int64_t n, const int32_t *chunk, const int64_t *local, const int32_t *const *offsets) {
    int64_t total = 0;
    for (int64_t k = 0; k < n; k++) {
        const int32_t *off = offsets[chunk[k]];
        total += (int64_t)off[local[k] + 1] - off[local[k]];
    }
    return total;
}

/* Writes out_offsets[0..n] (from 0) and the values' bytes to out_data, which holds gather_bytes() of them
 * (at most INT32_MAX: the caller splits bigger gathers). */
void gather_text(int64_t n, const int32_t *chunk, const int64_t *local, const int32_t *const *offsets,
                 const uint8_t *const *data, int32_t *out_offsets, uint8_t *out_data) {
    int32_t at = 0;
    out_offsets[0] = 0;
    for (int64_t k = 0; k < n; k++) {
        const int32_t *off = offsets[chunk[k]];
        int32_t start = off[local[k]], len = off[local[k] + 1] - start;
        memcpy(out_data + at, data[chunk[k]] + start, (size_t)len);
        at += len;
        out_offsets[k + 1] = at;
    }
}

int64_t gather_abi(void) { return GATHER_ABI; }
