/*
 * Repairing a lost chunk with PPR(6,3) the way a gateway would: build the
 * repair graph for chunk 2 (a reduction tree over the six survivors), look at
 * the primitive each vertex picked, run it on in-process devices (coherent,
 * then the incoherent baseline), and compare the rebuilt chunk with the one
 * that was lost.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codecs/codec.h"
#include "deg/deg.h"

#define LEN (64 * 1024)

static void rebuilt(void *arg, const struct deg_graph *g, int v, struct deg_label label,
                    const uint8_t *data, size_t len)
{
    const uint8_t *lost = arg;
    printf("  %s rebuilt chunk %d: %s\n", g->vertices[v].name, label.chunk,
           memcmp(data, lost, len) == 0 ? "equal to the lost chunk" : "WRONG");
    if (memcmp(data, lost, len) != 0)
        exit(1);
}

int main(void)
{
    struct codec_profile prof;
    struct codec *codec;
    char err[512];
    if (codec_profile_parse("ppr:k=6,m=3", &prof, err, sizeof(err)) ||
        codec_create(&prof, &codec, err, sizeof(err))) {
        fprintf(stderr, "ppr_repair: %s\n", err);
        return 1;
    }
    uint8_t *chunks[9];
    for (int i = 0; i < 9; i++) {
        chunks[i] = malloc(LEN);
        for (size_t b = 0; b < LEN; b++)
            chunks[i][b] = (uint8_t)(rand() >> 7);
    }
    codec_encode(codec, LEN, chunks);
    uint8_t *lost = malloc(LEN);
    memcpy(lost, chunks[2], LEN);
    memset(chunks[2], 0, LEN); /* the node holding chunk 2 is gone */

    /* Chunk i lives on node i; node 2's replacement receives the repair. */
    struct deg_request req = {.op = DEG_OP_DECODE, .nerased = 1, .erased = {2}};
    deg_placement_default(&req.placement);
    struct deg_graph *g;
    if (deg_build(codec, &req, &g, err, sizeof(err))) {
        fprintf(stderr, "ppr_repair: %s\n", err);
        return 1;
    }
    char *text = deg_to_text(g);
    fputs(text, stdout);
    free(text);

    int rc = 0;
    for (int mode = 0; mode < 2 && rc == 0; mode++) {
        struct deg_run_opts opts = {.incoherent = mode};
        printf("%s run:\n", mode ? "incoherent" : "coherent");
        rc = deg_run(g, LEN, chunks, &opts, rebuilt, lost, err, sizeof(err));
        if (rc)
            fprintf(stderr, "ppr_repair: %s\n", err);
    }
    deg_graph_destroy(g);
    for (int i = 0; i < 9; i++)
        free(chunks[i]);
    free(lost);
    codec_destroy(codec);
    return rc ? 1 : 0;
}
