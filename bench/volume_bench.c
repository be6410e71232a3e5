/*
 * `inec bench volume`: block I/O on a volume of an embedded cluster (RS(6,3),
 * as `inec server`) through the NBD server, driven by fio's nbd engine
 * (Debian's fio is built with libnbd): 1 MiB sequential write and read
 * (MB/s), 4 KiB random write and read (IOPS), each at queue depth 1 and 16.
 *
 * The floor, in the same run: the same fio jobs against qemu-nbd serving a
 * plain file in the same directory (an NBD server on the local disk, no
 * erasure code, no nodes); ratio = inec / floor. Reported, never asserted.
 * Write jobs flush after every write (fio --fsync=1, an NBD FLUSH), so both
 * sides count durable writes: inec's are durable when acknowledged anyway,
 * qemu-nbd's only once flushed.
 * The fio figures are what to put beside Ceph RBD's (fio --ioengine=rbd).
 * The volume is created as users get it (partial writes by read-modify-write);
 * then the 4K random writes run again on one created with "update": "delta"
 * (coherent primitives) and on one with "chains": "incoherent" too (the INEC
 * paper's baseline: the host advances every chain), so delta parity against
 * read-modify-write and coherent against incoherent are compared in the same
 * run, with the payload bytes the offload engine moved per write
 * (inec_bytes_moved around each job). --plot draws those three against the
 * queue depth (gnuplot).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "bench/bench.h"
#include "gateway/nbd_server.h"
#include "inec/inec.h"
#include "object/objects.h"
#include "volume/volume.h"

struct job {
    const char *name, *rw, *bs;
    int qd;
    bool iops; /* report IOPS (else MB/s) */
};

static const struct job jobs[] = {
    {"seq-write 1M", "write", "1M", 1, false},     {"seq-write 1M", "write", "1M", 16, false},
    {"seq-read 1M", "read", "1M", 1, false},       {"seq-read 1M", "read", "1M", 16, false},
    {"rand-write 4K", "randwrite", "4k", 1, true}, {"rand-write 4K", "randwrite", "4k", 16, true},
    {"rand-read 4K", "randread", "4k", 1, true},   {"rand-read 4K", "randread", "4k", 16, true},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: inec bench volume [--quick] [--json] [--size SIZE] [--seconds S]\n"
               "                         [--no-floor] [--plot FILE.png]\n"
               "  fio (--ioengine=nbd) on a volume of an embedded cluster (RS(6,3)) through the\n"
               "  NBD server: 1M sequential write/read MB/s, 4K random write/read IOPS, queue\n"
               "  depth 1 and 16; floor: the same jobs on qemu-nbd serving a local file.\n"
               "  --size     the volume and the floor file (256M; --quick 32M)\n"
               "  --seconds  per job (5; --quick 1)\n"
               "  Then 4K random writes by delta parity with coherent and with incoherent\n"
               "  primitives against read-modify-write, and the bytes moved per write;\n"
               "  --plot draws their IOPS per queue depth.\n");
}

/* fio's JSON for one job, or NULL (the reason printed). */
static json_t *run_fio(const struct job *j, const char *uri, const char *size, double seconds)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "fio --name=j --ioengine=nbd --uri='%s' --rw=%s --bs=%s --iodepth=%d --size=%s "
             "--runtime=%dms --time_based=%d --fsync=%d --output-format=json --randseed=7 2>&1",
             uri, j->rw, j->bs, j->qd, size, (int)(seconds * 1000), j->iops ? 1 : 0,
             strstr(j->rw, "write") ? 1 : 0);
    FILE *p = popen(cmd, "r");
    if (!p) {
        perror("popen fio");
        return NULL;
    }
    char *out = NULL;
    size_t len = 0, cap = 0;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) {
        if (len + n + 1 > cap) {
            cap = (len + n + 1) * 2;
            char *nb = realloc(out, cap);
            if (!nb)
                break;
            out = nb;
        }
        memcpy(out + len, buf, n);
        len += n;
    }
    int st = pclose(p);
    json_t *doc = NULL;
    const char *start = out ? memchr(out, '{', len) : NULL;
    if (out) {
        out[len] = '\0';
        doc = start ? json_loads(start, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
    }
    if (st != 0 || !doc) {
        fprintf(stderr, "inec bench volume: fio %s failed (status %d):\n%s\n", j->rw, st,
                out ? out : "");
        json_decref(doc);
        doc = NULL;
    }
    free(out);
    return doc;
}

/* IOPS or MB/s (1e6 B/s) of fio's first job; -1 when it failed. With
 * `moved`: the payload bytes the offload engine moved during the job (every
 * node is in this process, so every transfer between gateway and nodes and
 * between nodes) per I/O done, in KiB; a job that did I/O yet moved nothing
 * fails (the counter would be broken). */
static double figure(const struct job *j, const char *uri, const char *size, double seconds,
                     double *moved)
{
    uint64_t before = inec_bytes_moved();
    json_t *doc = run_fio(j, uri, size, seconds);
    uint64_t bytes = inec_bytes_moved() - before;
    if (!doc)
        return -1;
    json_t *side = json_object_get(json_array_get(json_object_get(doc, "jobs"), 0),
                                   strstr(j->rw, "write") ? "write" : "read");
    if (moved) {
        json_int_t ios = json_integer_value(json_object_get(side, "total_ios"));
        *moved = ios > 0 ? (double)bytes / (double)ios / 1024 : -1;
        if (ios > 0 && bytes == 0) {
            fprintf(stderr, "inec bench volume: %lld I/Os moved no bytes (inec_bytes_moved)\n",
                    (long long)ios);
            json_decref(doc);
            return -1;
        }
    }
    double v = j->iops ? json_number_value(json_object_get(side, "iops"))
                       : json_number_value(json_object_get(side, "bw_bytes")) / 1e6;
    int errors = (int)json_integer_value(
        json_object_get(json_array_get(json_object_get(doc, "jobs"), 0), "error"));
    json_decref(doc);
    return errors ? -1 : v;
}

/* qemu-nbd serving `file` on the Unix socket `sock`, in the background. */
static pid_t floor_start(const char *file, const char *sock)
{
    pid_t pid = fork();
    if (pid == 0) {
        execlp("qemu-nbd", "qemu-nbd", "-f", "raw", "-k", sock, "-e", "16", "-t", "--cache=none",
               "--aio=native", file, (char *)NULL);
        execlp("qemu-nbd", "qemu-nbd", "-f", "raw", "-k", sock, "-e", "16", "-t", file,
               (char *)NULL);
        _exit(127);
    }
    for (int i = 0; pid > 0 && i < 100 && access(sock, F_OK) != 0; i++)
        usleep(50000);
    return pid;
}

int bench_volume(int argc, char **argv)
{
    static const struct option lo[] = {
        {"quick", no_argument, NULL, 'q'},      {"json", no_argument, NULL, 'j'},
        {"size", required_argument, NULL, 's'}, {"seconds", required_argument, NULL, 't'},
        {"no-floor", no_argument, NULL, 'n'},   {"plot", required_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},       {NULL, 0, NULL, 0}};
    int quick = 0, json = 0, ch;
    bool with_floor = true;
    const char *plot_file = NULL;
    uint64_t size = 0;
    double seconds = 0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (ch) {
        case 'q':
            quick = 1;
            break;
        case 'j':
            json = 1;
            break;
        case 's':
            if (bench_parse_size(optarg, 1ull << 40, &size) || size % (1 << 20)) {
                fprintf(stderr, "inec bench volume: --size wants a multiple of 1M\n");
                return 2;
            }
            break;
        case 't':
            seconds = atof(optarg);
            if (!(seconds > 0 && seconds <= 600)) {
                fprintf(stderr, "inec bench volume: --seconds wants 0 < S <= 600\n");
                return 2;
            }
            break;
        case 'n':
            with_floor = false;
            break;
        case 'p':
            plot_file = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!size)
        size = quick ? 32ull << 20 : 256ull << 20;
    if (!seconds)
        seconds = quick ? 1 : 5;
    if (system("fio --enghelp=nbd >/dev/null 2>&1") != 0) {
        fprintf(stderr, "inec bench volume: fio with the nbd engine is missing "
                        "(scripts/deps.sh installs fio)\n");
        return 1;
    }
    char dir[] = "/tmp/inec-bench-volume-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char path[512], sock[600], floor_sock[600], floor_file[600], uri[700], floor_uri[700];
    snprintf(path, sizeof(path), "%s/data", dir);
    snprintf(sock, sizeof(sock), "%s/nbd.sock", dir);
    snprintf(floor_sock, sizeof(floor_sock), "%s/floor.sock", dir);
    snprintf(floor_file, sizeof(floor_file), "%s/floor.raw", dir);
    snprintf(uri, sizeof(uri), "nbd+unix:///bench?socket=%s", sock);
    snprintf(floor_uri, sizeof(floor_uri), "nbd+unix:///?socket=%s", floor_sock);
    char delta_uri[700], incoh_uri[700];
    snprintf(delta_uri, sizeof(delta_uri), "nbd+unix:///bench-delta?socket=%s", sock);
    snprintf(incoh_uri, sizeof(incoh_uri), "nbd+unix:///bench-incoherent?socket=%s", sock);
    char msg[512] = "", sizestr[32];
    snprintf(sizestr, sizeof(sizestr), "%llu", (unsigned long long)size);
    struct gw_objects *o = NULL;
    struct gw_nbd_server *nbd = NULL;
    json_t *vol = NULL;
    int rc = gw_objects_open_embedded(path, &o, msg, sizeof(msg));
    if (rc == 0) {
        json_t *spec =
            json_pack("{s:s,s:I,s:b}", "name", "bench", "size", (json_int_t)size, "secret", 0);
        rc = gw_volume_create(o, spec, &vol, msg, sizeof(msg));
        json_decref(spec);
        static const char *const chains[2] = {"coherent", "incoherent"};
        for (int i = 0; i < 2; i++) {
            json_t *delta = NULL;
            spec = json_pack("{s:s,s:I,s:b,s:s,s:s}", "name",
                             i ? "bench-incoherent" : "bench-delta", "size", (json_int_t)size,
                             "secret", 0, "update", "delta", "chains", chains[i]);
            if (rc == 0)
                rc = gw_volume_create(o, spec, &delta, msg, sizeof(msg));
            json_decref(spec);
            json_decref(delta);
        }
    }
    struct gw_nbd_config cfg = {.unix_path = sock};
    if (rc == 0)
        rc = gw_nbd_server_start(&cfg, o, &nbd, msg, sizeof(msg));
    pid_t floor_pid = -1;
    if (rc == 0 && with_floor) {
        FILE *f = fopen(floor_file, "w");
        if (!f || ftruncate(fileno(f), (off_t)size) != 0)
            rc = -errno;
        if (f)
            fclose(f);
        if (rc == 0 && (floor_pid = floor_start(floor_file, floor_sock)) < 0)
            rc = -ECHILD;
    }
    if (rc) {
        fprintf(stderr, "inec bench volume: %s\n", msg[0] ? msg : strerror(-rc));
    } else {
        json_t *rows = json_array();
        if (!json)
            printf("volume of %s on an embedded RS(6,3) cluster, stripe %lld B, %g s per job\n"
                   "%-14s %3s %6s %12s %12s %7s\n",
                   sizestr, json_integer_value(json_object_get(vol, "stripe_bytes")), seconds,
                   "job", "QD", "unit", "inec", "qemu-nbd", "ratio");
        for (size_t i = 0; i < sizeof(jobs) / sizeof(jobs[0]); i++) {
            const struct job *j = &jobs[i];
            double ours = figure(j, uri, sizestr, seconds, NULL);
            double fl = with_floor ? figure(j, floor_uri, sizestr, seconds, NULL) : -1;
            double ratio = ours > 0 && fl > 0 ? ours / fl : -1;
            if (ours < 0)
                rc = 1;
            json_array_append_new(rows, json_pack("{s:s,s:i,s:s,s:f,s:f,s:f}", "job", j->name, "qd",
                                                  j->qd, "unit", j->iops ? "IOPS" : "MB/s", "inec",
                                                  ours, "floor", fl, "ratio", ratio));
            if (!json) {
                char f[32] = "-", r[32] = "-";
                if (fl >= 0)
                    snprintf(f, sizeof(f), "%.1f", fl);
                if (ratio >= 0)
                    snprintf(r, sizeof(r), "%.3f", ratio);
                printf("%-14s %3d %6s %12.1f %12s %7s\n", j->name, j->qd, j->iops ? "IOPS" : "MB/s",
                       ours, f, r);
            }
            fflush(stdout);
        }
        /* Delta parity against read-modify-write, and coherent against
         * incoherent primitives: the same 4K random writes on volumes whose
         * writes inside one chunk go through the update DEG (stored first, so
         * that they do). */
        if (!json)
            printf("\n4K random writes by delta parity (coherent, incoherent primitives) vs "
                   "read-modify-write (IOPS)\n%3s %12s %12s %12s %10s %10s\n",
                   "QD", "coherent", "incoherent", "rmw", "delta/rmw", "coh/incoh");
        const struct job fill = {"fill", "write", "1M", 16, false};
        if (figure(&fill, delta_uri, sizestr, seconds, NULL) < 0 ||
            figure(&fill, incoh_uri, sizestr, seconds, NULL) < 0)
            rc = 1;
        /* KiB moved per write: coherent, incoherent, rmw. */
        struct traffic {
            int qd;
            double kib[3];
        } traffic[sizeof(jobs) / sizeof(jobs[0])];
        int ntraffic = 0;
        struct bench_series curves[3] = {{"delta parity, coherent", .color = 1},
                                         {"delta parity, incoherent", .color = 2},
                                         {"read-modify-write", .dashed = true, .color = 3}};
        for (size_t i = 0; i < sizeof(jobs) / sizeof(jobs[0]); i++) {
            const struct job *j = &jobs[i];
            if (strcmp(j->rw, "randwrite") != 0)
                continue;
            struct traffic *t = &traffic[ntraffic++];
            *t = (struct traffic){j->qd, {-1, -1, -1}};
            double d = figure(j, delta_uri, sizestr, seconds, &t->kib[0]);
            double di = figure(j, incoh_uri, sizestr, seconds, &t->kib[1]);
            double r = figure(j, uri, sizestr, seconds, &t->kib[2]);
            if (d < 0 || di < 0 || r < 0)
                rc = 1;
            double dr = d > 0 && r > 0 ? d / r : -1, ci = d > 0 && di > 0 ? d / di : -1;
            json_array_append_new(rows, json_pack("{s:s,s:i,s:s,s:f,s:f,s:f}", "job",
                                                  "rand-write 4K delta vs rmw", "qd", j->qd, "unit",
                                                  "IOPS", "delta", d, "rmw", r, "ratio", dr));
            json_array_append_new(rows, json_pack("{s:s,s:i,s:s,s:f,s:f,s:f}", "job",
                                                  "rand-write 4K coherent vs incoherent", "qd",
                                                  j->qd, "unit", "IOPS", "coherent", d,
                                                  "incoherent", di, "ratio", ci));
            const double ys[3] = {d, di, r};
            for (int c = 0; c < 3; c++)
                if (ys[c] > 0 && bench_series_add(&curves[c], j->qd, ys[c]))
                    rc = 1;
            if (!json)
                printf("%3d %12.1f %12.1f %12.1f %10.3f %10.3f\n", j->qd, d, di, r, dr, ci);
        }
        /* Bytes moved per write, in KiB, in 4 KiB chunks and in chunks of the
         * volume (its stripe over the k = 6 of RS(6,3)): issue 13 expects about
         * k+m chunks by read-modify-write, 1+m by delta parity. */
        double chunk_kib =
            (double)json_integer_value(json_object_get(vol, "stripe_bytes")) / 6 / 1024;
        if (!json)
            printf("\nbytes the offload engine moved per 4K random write (gateway<->nodes, "
                   "node<->node):\nKiB (in 4 KiB chunks, in chunks of the volume: %g KiB)\n"
                   "%3s %23s %23s %23s\n",
                   chunk_kib, "QD", "coherent", "incoherent", "rmw");
        for (int i = 0; i < ntraffic; i++) {
            const struct traffic *t = &traffic[i];
            json_array_append_new(rows, json_pack("{s:s,s:i,s:s,s:f,s:f,s:f,s:f,s:f,s:f,s:f}",
                                                  "job", "rand-write 4K bytes moved per write",
                                                  "qd", t->qd, "unit", "KiB", "coherent", t->kib[0],
                                                  "incoherent", t->kib[1], "rmw", t->kib[2],
                                                  "coherent_chunks", t->kib[0] / 4,
                                                  "incoherent_chunks", t->kib[1] / 4, "rmw_chunks",
                                                  t->kib[2] / 4, "volume_chunk_kib", chunk_kib));
            if (!json) {
                printf("%3d", t->qd);
                for (int c = 0; c < 3; c++)
                    printf(" %9.1f (%5.1f, %5.2f)", t->kib[c], t->kib[c] / 4,
                           t->kib[c] / chunk_kib);
                printf("\n");
            }
        }
        if (plot_file) {
            int prc = bench_plot(plot_file, "inec bench volume: 4K random writes", "queue depth",
                                 "IOPS", 0, curves, 3);
            if (prc) {
                fprintf(stderr, "inec bench volume: --plot %s: %s\n", plot_file, strerror(-prc));
                rc = 1;
            } else if (!json) {
                printf("plot: %s\n", plot_file);
            }
        }
        bench_series_free(curves, 3);
        if (json) {
            json_dumpf(rows, stdout, JSON_INDENT(2));
            printf("\n");
        }
        json_decref(rows);
    }
    if (floor_pid > 0) {
        kill(floor_pid, SIGTERM);
        waitpid(floor_pid, NULL, 0);
    }
    gw_nbd_server_stop(nbd);
    json_decref(vol);
    gw_objects_close(o);
    bench_rmtree(dir);
    return rc ? 1 : 0;
}
