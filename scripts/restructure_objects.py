#!/usr/bin/env python3
"""Moves the object layer out of gateway/ into object/ (and volumes into volume/).

Run once, from the top of a clean checkout whose object layer is still in
gateway/ (issue 11, "the object layer's shape"); then build, test, commit, and
delete this script (it has no use after it ran):

    python3 scripts/restructure_objects.py --check      # file call graph of today's tree
    python3 scripts/restructure_objects.py --dry-run    # the graph the recipe would make
    python3 scripts/restructure_objects.py              # moves, splits, rewrites (git mv/add/rm)
    python3 scripts/restructure_objects.py --check-tree # the graph of object/ and volume/ after
    meson compile -C build                              # meson reconfigures itself

What it does, deterministically, from the recipe below (MOVES, SPLITS,
FOLDS, RENAMES, FILES):
  - git mv of whole files (gateway/layout.c -> object/layout.c, ...); a
    gateway/*.c the recipe does not name but that includes a layer header (a
    helper added it) moves whole too, and so does a header only such files use;
  - splits the big files by top-level definition (functions, structs, macros,
    each with its leading comment): a definition goes where its SPLITS 'names'
    entry says, else where its `/* --- section --- */` says, so a function a
    helper added after the recipe was written goes with its section; a
    definition or section it cannot place stops the script, nothing is dropped;
  - a private function (or variable) that another new file uses becomes
    non-static, named as RENAMES says (else gw_ + its name), with a prototype
    in the folder's internal header; structs and macros move into that
    header; a public wrapper that only called a private function (FOLDS) goes;
  - regroups the internal headers' prototypes by the new file that defines
    them, writes each new file's header comment (FILES: its one idea);
  - rewrites #include "gateway/x.h" everywhere, the meson lists, and the
    gateway/x.c mentions of moved files in comments and docs;
  - prints the file-level graph of the new folders and fails when it has a
    cycle (--check prints today's, with its cycles, and changes nothing).
"""
import os
import re
import subprocess
import sys

# --------------------------------------------------------------------------- recipe

OBJ = 'object'
VOL = 'volume'

# Whole files that only change folder.
MOVES = {
    'gateway/objects.h': 'object/objects.h',
    'gateway/objects_internal.h': 'object/objects_internal.h',
    'gateway/repair.h': 'object/repair.h',
    'gateway/stripe_fetch.h': 'object/stripe_fetch.h',
    'gateway/stripe_fetch.c': 'object/stripe_fetch.c',
    'gateway/layout.c': 'object/layout.c',
    'gateway/multipart.c': 'object/multipart.c',
    'gateway/lifecycle.c': 'object/lifecycle.c',
    'gateway/tombstones.c': 'object/tombstones.c',
    'gateway/scanner.c': 'object/scanner.c',
    'gateway/repair_queue.c': 'object/repair_queue.c',
    'gateway/volume.h': 'volume/volume.h',
    'gateway/volume_internal.h': 'volume/volume_internal.h',
    'gateway/volume_delta.c': 'volume/volume_delta.c',
}

# Files cut into several: per file, its sections' new homes ('' = before the
# first section marker) and per-name overrides (they win over the section).
SPLITS = {
    'gateway/cluster.c': {
        'sections': {
            '': 'object/clock.c',
            'fan-out': 'object/fanout.c',
            'clients': 'object/clients.c',
            'pools': 'object/pools.c',
            'open / close': 'object/open.c',
            'control API queries': 'object/open.c',
        },
        'names': {
            'FAN_THREADS': 'object/fanout.c',
            'FAN_MAX': 'object/fanout.c',
            'gw_pools_usage_set': 'object/pools.c',
            'gw_decode_graph': 'object/pools.c',
            'gw_transport_error': 'object/peer_state.c',
        },
    },
    'gateway/detector.c': {
        'sections': {'': 'object/detector.c'},
        'names': {n: 'object/peer_state.c' for n in (
            'SUSPECT_BEATS', 'gw_peer_state_name', 'gw_peer_state', 'gw_node_is_down', 'note',
            'gw_peer_answered', 'gw_peer_failed', 'gw_peer_json')},
    },
    'gateway/objmeta.c': {
        'sections': {
            '': 'object/records.c',
            'versions': 'object/meta_homes.c',
            'writes': 'object/meta_write.c',
            'decisions': 'object/meta_decide.c',
            'reads': 'object/meta_read.c',
            'listing': 'object/meta_list.c',
        },
        'names': {'dump': 'object/records.c', 'gw_hlc_observe': 'object/version_clock.c', 'gw_hlc_next': 'object/version_clock.c',
                  'HLC_TICK': 'object/version_clock.c'},
    },
    'gateway/objects.c': {
        'sections': {
            '': 'object/put.c',
            'small helpers': 'object/records.c',
            'garbage': 'object/gc.c',
            'buckets': 'object/buckets.c',
            'object records': 'object/object_records.c',
            'PUT': 'object/put.c',
            'encode sessions': 'object/sessions.c',
            'degraded writes': 'object/put.c',
            'GET': 'object/get.c',
            'control API: one object': 'object/get.c',
            'for multipart.c': 'object/records.c',
        },
        'names': {
            'MAX_STRIPES': 'object/put.c',
            'PROBE_STRIPES': 'object/get.c',
            'node_of': 'object/layout.c',
            'chunk_missing': 'object/layout.c',
            'route_around': 'object/get.c',
            'struct probe_job': 'object/detector.c',
            'probe_one': 'object/detector.c',
            'probe': 'object/detector.c',
            'gw_object_info_clear': 'object/records.c',
            'object_info': 'object/records.c',
            'gw_rec_set_extras': 'object/records.c',
            'gw_rec_copy_extras': 'object/records.c',
            'valid_bucket': 'object/records.c',
            'check_key': 'object/records.c',
            'gw_check_key': 'object/records.c',
        },
    },
    'gateway/volume.c': {
        'sections': {'': 'volume/volume.c', 'I/O': 'volume/volume.c'},
        'names': {n: 'volume/volume_stripe.c' for n in (
            'LOCK_SLOTS', 'stripe_locks', 'gw_volume_stripe_lock', 'gw_volume_stripe_key',
            'gw_volume_stripe_store', 'all_zero')},
    },
    'gateway/repair.c': {
        'sections': {
            '': 'object/repair_state.c',
            'node states': 'object/repair_state.c',
            'the admin record': 'object/repair_admin.c',
            'reports': 'object/repair_note.c',
            'repairing one stripe': 'object/repair.c',
            'the worker loop': 'object/repair.c',
            'status': 'object/repair_status.c',
            'start / stop': 'object/repair_state.c',
        },
        'names': {
            'IDLE_WAIT_MS': 'object/repair.c',
            'ADMIN_EVERY_MS': 'object/repair_admin.c',
            'PASS_MAX': 'object/repair.c',
            'ECPIPE_MIN_CHUNK': 'object/repair.c',
            'flush_pending': 'object/repair_note.c',
            'deadline_after': 'object/repair_state.c',
            'gw_repair_start': 'object/repair_service.c',
            'gw_repair_stop': 'object/repair_service.c',
            'opt_ms': 'object/repair_service.c',
        },
    },
}

# Names a private definition gets when another file needs it (default: gw_ + name).
RENAMES = {
    'hex': 'gw_hex_encode',
    'node_of': 'gw_stripe_node',
    'chunk_missing': 'gw_stripe_chunk_missing',
    'valid_bucket': 'gw_valid_bucket',
    'note': 'gw_peer_note',
    'now_ms': 'gw_repair_now_ms',
    'scheme_parse': 'gw_repair_scheme_parse',
    'deadline_after': 'gw_repair_deadline',
    'dump': 'gw_rec_dump',
    'failed': 'gw_meta_round_error',
    'meta_nodes': 'gw_meta_homes',
    'meta_nodes_excl': 'gw_meta_homes_excl',
    'admin_load': 'gw_repair_admin_load',
    'flush_pending': 'gw_repair_flush_pending',
    'map_json': 'gw_cluster_map_json',
    'worker_main': 'gw_repair_worker_main',
    'ADMIN_EVERY_MS': 'GW_REPAIR_ADMIN_EVERY_MS',
    'PENDING_MAX': 'GW_REPAIR_PENDING_MAX',
    'REMOVED_MAX': 'GW_REPAIR_REMOVED_MAX',
    'FAN_THREADS': 'GW_FAN_THREADS',
    'struct round': 'struct gw_meta_round',
    'struct chunk_job': 'struct gw_chunk_job',
    'settings_apply': 'gw_repair_settings_apply',
    'silent_ms': 'gw_node_silent_ms',
    'scheme_names': 'gw_repair_scheme_names',
    'put_as_is': 'gw_meta_put_as_is',
    'read_chunk': 'gw_get_read_chunk',
    'probe': 'gw_probe_nodes',
    'loss_reason': 'gw_chunk_loss_reason',
}

# Every file of the new folders, lowest first (a file may call only files
# before it), with the comment that opens it: the one idea it holds.
FILES = [
    ('object/clock.c', 'The gateway\'s clocks: monotonic milliseconds for timeouts and ages, the\n'
     'wall clock for what clients see (mtimes, creation times).'),
    ('object/fanout.c', 'The fan-out: threads that run batches of jobs, so the gateway calls\n'
     'several nodes at once; the pool grows (up to FAN_MAX) while calls hang on a\n'
     'node, so a hung node never stalls the calls to the others.'),
    ('object/peer_state.c', 'What the gateway believes of each node: one verdict per node (up,\n'
     'suspect, down) from evidence, never from a timer alone. Below the clients,\n'
     'which report to it, and the detector (detector.c), which probes through them.\n\n'
     'Evidence: every call\'s outcome (gw_client_put) and a probe (a health call)\n'
     'sent every heartbeat_ms to each node that has not answered anything within\n'
     'the last heartbeat. An answer clears every doubt at once. A failed call or\n'
     'a probe unanswered for 2 heartbeats makes the node *suspect*: reads route\n'
     'around it while the code can do without it, writes still use it. It is\n'
     '*down* (placement skips it, writes leave its chunk missing) only when it\n'
     'has been silent for the map\'s peer_timeout_ms, or when a connection to it\n'
     'is refused (nothing listens: a fact, not a guess). The tcp transport\'s own\n'
     'heartbeats (inec/providers/soft/tcp.c) keep idle connections from being\n'
     'taken for dead; this layer judges the node service itself.'),
    ('object/clients.c', 'RPC clients of the nodes: an idle one per call, or a new connection; every\n'
     'call\'s outcome is the failure detector\'s evidence (peer_state.c).'),
    ('object/detector.c', 'The failure detector\'s probes: on their own threads, a health call every\n'
     'heartbeat_ms to each node that has not answered anything within the last\n'
     'heartbeat, and probes of chosen nodes for the PUT path. What the answers\n'
     'mean (up, suspect, down) is peer_state.c\'s.'),
    ('object/pools.c', 'Pools: their codecs, the pool a bucket names, the usage the scanner\n'
     'counted, and pools added through the control API (saved with the\n'
     'embedded cluster\'s map).'),
    ('object/version_clock.c', None),
    ('object/records.c', 'One record\'s fields: versions, tombstones, object ids, the names S3\n'
     'allows, the stored headers and ACL; pure helpers on JSON records, below\n'
     'every file that reads or writes records.'),
    ('object/layout.c', None),
    ('object/meta_homes.c', '@gateway/objmeta.c\n'
     'This file: which nodes are a record\'s homes. The others: meta_write.c,\n'
     'meta_read.c, meta_decide.c, meta_list.c; versions: version_clock.c.'),
    ('object/meta_write.c', None),
    ('object/meta_read.c', None),
    ('object/meta_decide.c', None),
    ('object/meta_list.c', 'Listing records: a k-way merge of every node\'s ordered index, each\n'
     'key\'s newest record, tombstones dropped.'),
    ('object/repair_state.c', 'The repair service\'s shared state: its settings, the node states that\n'
     'decide what counts as lost, and the questions the scanner asks it.'),
    ('object/repair_queue.c', None),
    ('object/repair_note.c', 'Reports of degraded stripes (a read, a degraded write, the scanner):\n'
     'buffered for a moment, flushed to the durable queue by the worker.'),
    ('object/gc.c', 'Garbage: the chunks of a replaced or deleted version are deleted\n'
     'gc_delay_ms after the change, a delay longer than the longest GET.'),
    ('object/bucket_cache.c', None),
    ('object/buckets.c', 'Buckets: their records in the store bucket ".", create, delete when\n'
     'empty, head, list, ACL and other fields.'),
    ('object/object_records.c', 'The object calls that touch only its record: HEAD, DELETE, the ACL,\n'
     'listing.'),
    ('object/sessions.c', None),
    ('object/put.c', 'PUT: an object streamed into stripes, written through the pool\'s encode\n'
     'DEG, then published by its metadata record.\n\n'
     'Layout. An object is cut into stripes of k data chunks. Full stripes use the\n'
     'pool\'s chunk size; the last stripe, holding the rem < k * chunk_size bytes\n'
     'left, uses chunk length L = ceil(rem / k) rounded up to 64 bytes (zero\n'
     'padded), so a 1 KiB object costs n chunks of 192 bytes, not n full chunks;\n'
     'a 0-byte object has no stripe at all, only its metadata record. Every\n'
     'stripe is written by the pool\'s encode DEG (the gateway is the source\n'
     'vertex, each node sink stores its chunk durably before the run reports\n'
     'done) on the n nodes placement chose for (object id, stripe); with nodes\n'
     'down, on fewer (at least the pool\'s write quorum, see "degraded writes").\n\n'
     'Versions. Each upload gets a random 128-bit object id: its chunks are\n'
     '{object id, stripe, chunk index}, so two uploads of one key never share a\n'
     'chunk, and a reader that fetched version v\'s record reads only v\'s chunks.\n'
     'The record is written after every stripe is durable; its version comes\n'
     'from the gateway\'s hybrid logical clock (version_clock.c) and the nodes\n'
     'keep only the highest version, so the last acknowledged commit wins. The\n'
     'replaced version\'s chunks are deleted gc_delay_ms after the commit\n'
     '(gc.c: readers that started before it can finish); a commit that lost a\n'
     'race deletes its own chunks.'),
    ('object/stripe_fetch.c', None),
    ('object/decode_sessions.c', None),
    ('object/get.c', 'GET: an object read stripe by stripe from its record, and the control\n'
     'API\'s view of one object (which reads chunks the same way).\n\n'
     'GET reads only the data chunks its range touches, one stripe at a time,\n'
     'and checks each against the CRC32C in the record. A chunk known lost\n'
     'before the read (never written, node down or suspect) turns the stripe\n'
     'into a degraded read: the pool\'s decode DEG rebuilds the lost data chunks\n'
     'at the gateway from survivors (checked against the record\'s CRCs too), the\n'
     'stripe is counted and the lost chunks are queued for repair. What fails or\n'
     'is late during the read, and a DEG that fails, is read around by the\n'
     'direct reads of stripe_fetch.c (other chunks decoded here, hedges,\n'
     'retries); the next stripe\'s reads go out while one streams. More than m\n'
     'lost chunks: -EIO.'),
    ('object/multipart.c', None),
    ('object/lifecycle.c', None),
    ('object/repair_admin.c', 'The admin record: node states and repair settings set through the\n'
     'control API, on every node, so every gateway and every restart sees them.'),
    ('object/repair.c', None),
    ('object/repair_status.c', 'Repair status for the control API and metrics: progress, ETA, the\n'
     'queue, the last scan.'),
    ('object/tombstones.c', None),
    ('object/scanner.c', None),
    ('object/repair_service.c', 'Starts and stops the repair service: the worker and the scanner\n'
     'threads, with their settings from the gateway options.'),
    ('object/open.c', 'Opening and closing the object layer (embedded: nine node services in\n'
     'this process; or node processes over tcp named by a cluster map), and the\n'
     'control API\'s cluster queries: the top of the layer, the one file that\n'
     'starts and stops gc, sessions, repair and the detector.'),
    ('volume/volume_stripe.c', 'A volume\'s stripes as objects: the key of stripe s, the lock that\n'
     'serialises writes to one stripe in this gateway, and storing a whole\n'
     'stripe as a new object version (or none, when it is all zeros).'),
    ('volume/volume_delta.c', None),
    ('volume/volume.c', None),
]

# A file whose comment is its one section's: the words before the section's title.
TITLE_PREFIX = {'gateway/objmeta.c': 'metadata records, '}

# A private function with a public wrapper that only calls it: the wrapper
# goes, the function takes the public name.
FOLDS = {
    'gateway/objects.c': {'check_key': 'gw_check_key', 'next_version': 'gw_next_version',
                          'object_info': 'gw_rec_object_info'},
}


# Comments that name a file that was split: (file, old text, new text). One
# that is not found any more is reported, not fatal.
COMMENT_FIXES = [
    ('object/objects_internal.h', '''Shared between the files of the object layer (cluster.c, objmeta.c,
 * objects.c); nothing outside gateway/objects*.c, cluster.c, objmeta.c
 * includes it.''', '''Shared between the files of the object layer (object/) and the volume
 * layer over it (volume/); nothing else includes it but the layer's tests.'''),
    ('object/objects_internal.h', 'through the control API (repair.c)', 'through the control API (repair_admin.c)'),
    ('object/objects_internal.h', 'its records moved (repair.c)', 'its records moved (repair_admin.c)'),
    ('object/objects_internal.h', 'the version clock (objmeta.c)', 'the version clock (version_clock.c)'),
    ('object/objects_internal.h', 'metadata replication (objmeta.c)', 'metadata replication (meta_*.c)'),
    ('object/objects_internal.h', 'Idle encode sessions (objects.c)', 'Idle encode sessions (sessions.c)'),
    ('object/objects_internal.h', 'the repair service (repair.c)', 'the repair service (repair_service.c)'),
    ('object/objects_internal.h', '(see objmeta.c)', '(see meta_decide.c)'),
    ('object/open.c', 'up or not: objmeta.c.', 'up or not: meta_homes.c.'),
    ('object/records.c', 'The version clock (objmeta.c)', 'The version clock (version_clock.c)'),
    ('object/multipart.c', '(objmeta.c dumps keys sorted)', '(gw_rec_dump sorts keys)'),
    ('object/repair.h', '''(repair.c, repair_queue.c,
 * scanner.c; objects.c and cluster.c call in through these functions).''',
     '''(repair*.c, scanner.c,
 * tombstones.c; the put and get paths and open.c call in through these
 * functions).'''),
    ('object/stripe_fetch.h', "the GET path's reads (objects.c)", "the GET path's reads (get.c)"),
    ('object/decode_sessions.h', "lost data chunks\n * (objects.c).", "lost data chunks\n * (get.c)."),
]

# Files allowed to call each other (sorted tuple -> why they are one idea).
# None today: every circle was broken by moving functions (see FILES).
ALLOWED_CYCLES = {}

# --------------------------------------------------------------------------- C parsing

IDENT = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
KEYWORDS = set('''auto break case char const continue default do double else enum extern float for
goto if inline int long register restrict return short signed sizeof static struct switch typedef
union unsigned void volatile while _Atomic _Bool _Static_assert _Thread_local _Alignof _Noreturn
bool true false NULL'''.split())


def die(msg):
    sys.exit('restructure_objects: ' + msg)


def mask(text):
    """text with comments and string/char literals blanked (same offsets)."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if out[k] != '\n':
                    out[k] = ' '
            i = j
        elif text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = ' '
            i = j
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            for k in range(i + 1, min(j, n)):
                if out[k] != '\n':
                    out[k] = ' '
            i = j + 1
        else:
            i += 1
    return ''.join(out)


class Item:
    """One top-level piece of a C file: a definition or declaration with the
    comments right before it."""

    def __init__(self, **kw):
        self.lead = []
        self.names = set()
        self.static = False
        self.__dict__.update(kw)

    def full(self):
        return ''.join(c + ('\n\n' if blank else '\n') for c, blank in self.lead) + self.text

    def __repr__(self):
        return f'<{self.kind} {self.name} {self.src}:{self.line}>'


TYPEISH = r'(?:bool|char|short|int|long|unsigned|signed|float|double|void|\w+_t|struct\s+\w+|enum\s+\w+)'
LOCAL = re.compile(r'\b' + TYPEISH + r'(?:\s+const)?[\s*]+(\w+)\s*(?=[=;,\[)])')


def refs_of(masked):
    """Identifiers an item uses, minus the locals and parameters it declares
    (a local `probe` is no call of a function probe())."""
    body = masked[masked.find('('):] if '(' in masked else masked
    local = {m.group(1) for m in LOCAL.finditer(body)}
    local |= {m.group(1) for m in re.finditer(r',\s*\**\s*(\w+)\s*(?=[;=])', body)}
    called = set(re.findall(r'(\w+)\s*\(', masked))
    return {r for r in _refs(masked) if r not in local or r in called}


def _refs(masked):
    out = set()
    prev = None
    for t in re.finditer(r'->|\.|[A-Za-z_][A-Za-z0-9_]*', masked):
        v = t.group(0)
        if prev in ('->', '.'):
            prev = v
            continue
        if v in ('->', '.'):
            prev = v
            continue
        if prev in ('struct', 'union', 'enum'):
            out.add(prev + ' ' + v)
        elif v not in KEYWORDS:
            out.add(v)
        prev = v
    return out


def classify(masked, raw, where):
    s = masked.strip()
    it = Item(text=raw.strip(), masked=s)
    it.static = s.startswith('static') or s.startswith('inline static')
    if s.startswith('typedef'):
        flat = re.sub(r'\{[^{}]*\}', '', s)
        it.kind, it.name = 'typedef', IDENT.findall(flat)[-1]
        it.names = {it.name}
    elif re.match(r'(struct|union|enum)\s+\w+\s*;$', s):
        it.kind, it.name = 'fwd', ' '.join(s[:-1].split())
    elif re.match(r'(static\s+)?(struct|union|enum)\s+\w+\s*\{', s) and s.endswith('};'):
        m = re.match(r'(?:static\s+)?(struct|union|enum)\s+(\w+)', s)
        it.kind, it.name = 'struct', m.group(1) + ' ' + m.group(2)
        it.names = {it.name}
        if m.group(1) == 'enum':
            body = s[s.index('{') + 1:s.rindex('}')]
            it.names |= {IDENT.search(p).group(0) for p in body.split(',') if IDENT.search(p)}
    else:
        # before any '{' that opens an anonymous type, no '=' or '(' comes
        flat = s
        while '{' in flat:
            pre = flat[:flat.index('{')]
            if '=' in pre or '(' in pre:
                break
            flat = re.sub(r'\{[^{}]*\}', ' ', flat, count=1)
            if '{' in flat and flat.index('{') == len(pre):
                continue
        p = flat.find('(')
        cut = min([x for x in (p, flat.find('='), flat.find('[')) if x >= 0] or [len(flat)])
        if p >= 0 and p == cut and not flat[p + 1:].lstrip().startswith('*'):
            ids = IDENT.findall(flat[:p])
            if not ids:
                die(f'{where}: cannot name {s[:60]!r}')
            it.name = ids[-1]
            it.kind = 'func' if s.endswith('}') else 'proto'
            if it.kind == 'func':
                it.names = {it.name}
        else:
            it.kind = 'var'
            decl = flat.split('=')[0] if '(' not in flat.split('=')[0] else flat
            names = []
            depth = 0
            last = None
            for t in re.finditer(r'[A-Za-z_]\w*|[\[\](),;=]', decl):
                v = t.group(0)
                if v in '([':
                    if depth == 0 and v == '[' and last:
                        names.append(last)
                        last = None
                    depth += 1
                elif v in ')]':
                    depth -= 1
                elif depth == 0 and v in ',;=' and last:
                    names.append(last)
                    last = None
                elif depth == 0 and v not in ',;=':
                    last = v
            if last:
                names.append(last)
            names = [x for x in names if x not in KEYWORDS]
            if not names:
                die(f'{where}: cannot name {s[:60]!r}')
            it.name = names[0]
            it.names = set(names)
    return it


def trailing_comment(text, j):
    """End of an item with the comment that follows it on its last line."""
    m = re.match(r'[ \t]*(/\*(?:(?!\*/)[^\n])*\*/|//[^\n]*)[ \t]*(?=\n|$)', text[j:])
    return j + m.end() if m else j


def parse(text, path):
    """(head comment, items, trailing comments) of a C file."""
    m = mask(text)
    n = len(text)
    items, pending = [], []
    section, head, i = '', None, 0

    def lineno(p):
        return text.count('\n', 0, p) + 1

    while True:
        while i < n and text[i] in ' \t\n':
            i += 1
        if i >= n:
            break
        if text.startswith('/*', i) or text.startswith('//', i):
            j = text.find('*/', i) + 2 if text.startswith('/*', i) else text.find('\n', i)
            if j < i:
                j = n
            body = text[i:j]
            blank = re.match(r'[ \t]*\n[ \t]*\n', text[j:]) is not None
            if i == 0:
                head = body
            elif re.match(r'/\*\s*-{3,}', body):
                first = body.split('\n')[0]
                section = re.sub(r'^/\*\s*-+\s*', '', first)
                section = re.sub(r'[\s-]*(\*/)?\s*$', '', section).strip()
                items.append(Item(kind='section', name=section, text=body, section=section,
                                  src=path, line=lineno(i), masked=''))
            else:
                pending.append((body, blank))
            i = j
            continue
        if text[i] == '#':
            j = i
            while True:
                e = text.find('\n', j)
                e = n if e < 0 else e
                if text[j:e].rstrip().endswith('\\') and e < n:
                    j = e + 1
                    continue
                break
            line = text[i:e]
            d = re.match(r'#\s*(\w+)\s*(\S*)', line)
            kind = {'include': 'include', 'define': 'macro'}.get(d.group(1), 'pp')
            it = Item(kind=kind, text=line, lead=pending, section=section, src=path,
                      line=lineno(i), masked=mask(line))
            if kind == 'macro':
                it.name = IDENT.match(d.group(2)).group(0)
                it.names = {it.name}
                it.masked = it.masked.replace('define', ' ', 1).replace(it.name, ' ', 1)
            else:
                it.name = d.group(2)
            items.append(it)
            pending, i = [], e
            continue
        depth, j, brace = 0, i, None
        while j < n:
            c = m[j]
            if c in '({[':
                if c == '{' and depth == 0 and brace is None:
                    brace = j
                depth += 1
            elif c in ')}]':
                depth -= 1
                if depth == 0 and c == '}' and brace is not None:
                    before = m[i:brace].rstrip()
                    if before.endswith(')') and '=' not in m[i:brace]:
                        j += 1
                        break
            elif c == ';' and depth == 0:
                j += 1
                break
            j += 1
        j = trailing_comment(text, j)
        it = classify(m[i:j], text[i:j], f'{path}:{lineno(i)}')
        it.lead, it.section, it.src, it.line = pending, section, path, lineno(i)
        pending = []
        items.append(it)
        i = j
    for it in items:
        it.refs = refs_of(it.masked) - it.names
    return head, items, pending


# --------------------------------------------------------------------------- helpers

def read(p):
    with open(p) as f:
        return f.read()


def write(p, s):
    os.makedirs(os.path.dirname(p) or '.', exist_ok=True)
    with open(p, 'w') as f:
        f.write(s)


def git(*args):
    subprocess.run(['git', *args], check=True)


def section_home(split, section, where):
    for key, dst in split['sections'].items():
        if key == section or (key and section.startswith(key)):
            return dst
    die(f'{where}: section "{section}" has no home in the recipe (SPLITS)')


def prototype(it, name, text):
    """The declaration of a function definition (or an extern one of a
    variable) whose text, renamed, is text, under its new name."""
    if it.kind == 'var':
        m = mask(text)
        head = text[:m.index('=')] if '=' in m else text.rstrip(';')
        head = 'extern ' + re.sub(r'^static\s+', '', head.strip())
        return re.sub(r'\b' + re.escape(it.name) + r'\b', name, head, count=1) + ';'
    head = text[:mask(text).index('{')].rstrip()
    head = re.sub(r'^(static\s+)?(inline\s+)?', '', head)
    head = re.sub(r'\b' + re.escape(it.name) + r'\b', name, head, count=1)
    return head + ';'


def rename_in(text, old, new):
    """Renames identifier old to new outside comments and strings, not after . or ->."""
    m = mask(text)
    out, last = [], 0
    for t in re.finditer(r'(?<![\w.>])' + re.escape(old) + r'\b', m):
        s = t.start()
        if s >= 2 and m[s - 2:s] == '->':
            continue
        out.append(text[last:s])
        out.append(new)
        last = t.end()
    out.append(text[last:])
    return ''.join(out)


SYSTEM_HEADERS = {
    'errno.h': r'E[A-Z0-9]+|errno',
    'stdio.h': r'\w*printf|\w*scanf|FILE|fopen|fclose|fread|fwrite|fflush|fputs|fgets|puts|rename|'
               r'remove|stderr|stdout|perror|getline|fileno',
    'stdlib.h': r'malloc|calloc|realloc|free|qsort|bsearch|strto\w+|abs|llabs|getenv|atoi|atol|'
                r'exit|abort|aligned_alloc|posix_memalign|rand|srand',
    'string.h': r'mem\w+|str\w+',
    'sys/random.h': r'getrandom',
    'time.h': r'clock_gettime|timespec|CLOCK_\w+|nanosleep|time|gmtime_r|localtime_r|time_t|'
              r'strftime|timegm',
    'unistd.h': r'close|read|write|unlink|usleep|fsync|fdatasync|getpid|access|sysconf|pread|'
                r'pwrite|ftruncate|lseek|_exit|sleep|rmdir',
    'fcntl.h': r'open|openat|O_\w+|fcntl',
    'sys/stat.h': r'stat|fstat|mkdir|S_\w+|chmod',
    'limits.h': r'(U?(INT|LONG|LLONG|CHAR|SHRT)|S?SIZE|SCHAR|UCHAR|PATH|IOV|NAME|HOST_NAME)_(MAX|MIN)',
    'inttypes.h': r'PRI\w+|SCN\w+',
    'pthread.h': r'pthread_\w+|PTHREAD_\w+',
    'stdatomic.h': r'atomic_\w+|_Atomic|memory_order\w*',
    'math.h': r'ceil|floor|sqrt|pow|log|log2|exp|fabs|round|lround|isnan|isfinite|fmin|fmax|INFINITY',
    'openssl/evp.h': r'EVP_\w+',
    'openssl/crypto.h': r'CRYPTO_\w+|OPENSSL_\w+',
}


def header_names(path, own=False):
    """Names a project header declares, with those of the project headers it
    includes (own: only its own)."""
    key = (path, own)
    if key in header_names.cache:
        return header_names.cache[key]
    header_names.cache[key] = set()
    names = set()
    if os.path.exists(path):
        _, items, _ = parse(read(path), path)
        for it in items:
            names |= it.names
            if it.kind == 'proto' or it.kind == 'fwd' and not own:
                names.add(it.name)
            if it.kind == 'include' and it.name.startswith('"') and not own:
                names |= header_names(it.name.strip('"'))
    header_names.cache[key] = names
    return names


header_names.cache = {}


def include_used(inc, refs, own=False):
    name = inc.strip('"<>')
    if inc.startswith('<'):
        pat = SYSTEM_HEADERS.get(name)
        if pat is None:
            return True
        return any(re.fullmatch(pat, r) for r in refs)
    return bool(header_names(name, own) & refs)


# --------------------------------------------------------------------------- the plan

LAYER_HEADERS = {'gateway/objects_internal.h': OBJ, 'gateway/repair.h': OBJ,
                 'gateway/stripe_fetch.h': OBJ, 'gateway/volume_internal.h': VOL}
# Headers whose prototypes are regrouped by the file that defines them; other
# headers move as they are (what is published is added at their end).
REGROUP = {'gateway/objects_internal.h', 'gateway/repair.h'}


def discover():
    """Files the recipe does not name (a helper added them) that belong to the
    layer: a gateway/*.c including a layer header moves whole to that layer's
    folder, and so does a header only such files include."""
    if discover.done:
        return
    discover.done = True
    known = set(MOVES) | set(SPLITS)
    incs = {}
    for f in sorted(os.listdir('gateway')):
        p = 'gateway/' + f
        if p.endswith(('.c', '.h')):
            incs[p] = set(re.findall(r'#include "(gateway/[^"]+)"', read(p)))
    layer_c = {p for p in known if p.endswith('.c')}
    layer_h = dict(LAYER_HEADERS)  # and the headers that include one
    grew = True
    while grew:
        grew = False
        for p in sorted(incs):
            hit = [layer_h[h] for h in incs[p] if h in layer_h]
            if p.endswith('.h') and p not in layer_h and hit:
                layer_h[p] = VOL if VOL in hit else OBJ
                grew = True
    for p in sorted(incs):
        if p.endswith('.c') and p not in known:
            hit = [layer_h[h] for h in incs[p] if h in layer_h]
            if hit:
                MOVES[p] = f'{VOL if VOL in hit else OBJ}/{os.path.basename(p)}'
                layer_c.add(p)
    for p in sorted(incs):
        if p.endswith('.h') and p not in known:
            users = {q for q in incs if p in incs[q] and q != p}
            if users and users <= layer_c | set(MOVES):
                folder = {MOVES[u].split('/')[0] for u in users if u in MOVES} or {OBJ}
                MOVES[p] = f'{sorted(folder)[-1]}/{os.path.basename(p)}'
    for p, dst in sorted(MOVES.items()):
        if p not in known:
            print(f'note: {p} is not in MOVES; it belongs to the layer and moves whole to {dst}')
            if dst.endswith('.c') and dst not in dict(FILES):
                at = [f for f, _ in FILES].index('object/open.c') if dst.startswith(OBJ) else len(FILES)
                FILES.insert(at, (dst, None))


discover.done = False


def layer_files():
    """The object layer's C files of today's tree, in gateway/."""
    discover()
    srcs = [p for p in list(MOVES) + list(SPLITS) if p.endswith('.c')]
    for p in srcs + [p for p in MOVES if p.endswith('.h')]:
        if not os.path.exists(p):
            die(f'{p} is missing: run this on the tree before the move')
    if os.path.exists(OBJ) or os.path.exists(VOL):
        die(f'{OBJ}/ or {VOL}/ exists already: run this on the tree before the move')
    return srcs


def plan():
    """Every item of the layer's .c files, with its new file (.home, None: not written)."""
    srcs = layer_files()
    homes = {f for f, _ in FILES}
    placed = []
    for src in srcs:
        _, items, tail = parse(read(src), src)
        if src in MOVES:
            dst = MOVES[src]
            for it in items:
                it.home = None if it.kind in ('include', 'section') else dst
        else:
            sp = SPLITS[src]
            for it in items:
                if it.kind in ('include', 'section'):
                    it.home = None
                    continue
                if it.kind == 'pp':
                    die(f'{src}:{it.line}: a top-level #{it.name} cannot be split; place it by hand')
                it.home = sp['names'].get(it.name) or section_home(sp, it.section, f'{src}:{it.line}')
            if tail:
                die(f'{src}: comments after the last definition: place them by hand')
        for priv, pub in FOLDS.get(src, {}).items():
            w = [it for it in items if it.kind == 'func' and it.name == pub]
            if len(w) != 1 or not re.search(r'\{\s*(return\s+)?' + priv + r'\([^;]*\);\s*\}$', w[0].masked):
                die(f'{src}: {pub} is not a wrapper of {priv} (FOLDS)')
            w[0].home = None
        for it in items:
            if it.home and it.home not in homes:
                die(f'{it.home} (for {it.name}) is not in FILES')
        placed.extend(items)
    for it in placed:
        if it.kind == 'proto' and it.static:
            it.home = None  # regenerated where still needed
    unknown = sorted({n for sp in SPLITS.values() for n in sp['names']} -
                     {n for it in placed for n in it.names | {it.name}})
    if unknown:
        print('note: recipe names no definition has (gone since?):', ', '.join(unknown))
    return placed


def shared(placed):
    """Private definitions another new file uses: functions to publish, types
    and macros for the internal header. Only within one source file: statics
    of different files never see each other."""
    by_src = {}
    for it in placed:
        by_src.setdefault(it.src, []).append(it)
    publish, to_header = {}, []
    for src, items in by_src.items():
        for it in items:
            if it.kind == 'func' and it.home and it.name in FOLDS.get(src, {}):
                publish[it] = FOLDS[src][it.name]
        defs = {}
        for it in items:
            if it.home is None:
                continue
            for nm in it.names:
                defs[nm] = it
        for it in items:
            if it.home is None:
                continue
            for r in it.refs:
                d = defs.get(r)
                if not d or d.home == it.home:
                    continue
                if d.kind in ('func', 'var') and d.static:
                    if len(d.names) > 1:
                        die(f'{d.src}:{d.line}: {sorted(d.names)} declared together are used from '
                            f'{it.home}: declare them apart first')
                    publish.setdefault(d, RENAMES.get(d.name, 'gw_' + d.name))
                elif d.kind in ('struct', 'macro', 'typedef', 'fwd'):
                    if d not in to_header:
                        to_header.append(d)
                        d.users = set()
                    d.users.add(it.home)
    # a type or macro moved to the header takes along the private types it uses
    changed = True
    while changed:
        changed = False
        for d in list(to_header):
            for r in d.refs:
                for it in by_src[d.src]:
                    if r in it.names and it.kind in ('struct', 'macro', 'typedef') and it not in to_header:
                        to_header.append(it)
                        it.users = set(d.users)
                        changed = True
    return publish, to_header


def file_graph(assign):
    """{file: {file it uses: {names}}} from items (file, item); a static name
    resolves only within the source file it came from."""
    glob, priv = {}, {}
    for f, it in assign:
        if it.kind in ('func', 'var', 'struct', 'typedef', 'macro'):
            for nm in it.names:
                if it.static or it.kind in ('macro', 'struct', 'typedef') and it.src.endswith('.c'):
                    priv.setdefault((it.src, nm), set()).add(f)
                else:
                    glob.setdefault(nm, set()).add(f)
    g = {}
    for f, it in assign:
        if not f.endswith('.c'):
            continue
        g.setdefault(f, {})
        for r in it.refs:
            for o in priv.get((it.src, r)) or glob.get(r, ()):
                if o != f and o.endswith('.c'):
                    g[f].setdefault(o, set()).add(r)
    return g


def cycles(g):
    """Strongly connected components with more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def print_graph(g, title):
    print(f'== {title}: file -> files it calls (names) ==')
    for f in sorted(g, key=rank):
        deps = g[f]
        if not deps:
            print(f'{f}: -')
            continue
        print(f'{f}: ' + '; '.join(f'{d} ({", ".join(sorted(deps[d])[:4])}'
                                    f'{", ..." if len(deps[d]) > 4 else ""})'
                                    for d in sorted(deps, key=rank)))


def rank(f):
    order = [x for x, _ in FILES]
    return (order.index(f) if f in order else len(order), f)


def check_acyclic(g, title):
    cyc = [c for c in cycles(g) if tuple(c) not in ALLOWED_CYCLES]
    for c in cycles(g):
        if tuple(c) in ALLOWED_CYCLES:
            print(f'allowed cycle {c}: {ALLOWED_CYCLES[tuple(c)]}')
    if cyc:
        for c in cyc:
            print(f'CYCLE in {title}: ' + ' <-> '.join(c))
            for a in c:
                for b in c:
                    if b in g.get(a, {}):
                        print(f'   {a} -> {b}: {", ".join(sorted(g[a][b]))}')
        return False
    print(f'{title}: no cycles between files')
    for f in sorted(g, key=rank):
        for d in sorted(g[f], key=rank):
            if rank(d) > rank(f):
                print(f'note: FILES lists {f} before {d}, which it calls (keep FILES lowest first)')
    return True


# --------------------------------------------------------------------------- today's graph

def check_today():
    assign = []
    for src in layer_files():
        _, items, _ = parse(read(src), src)
        assign += [(src, it) for it in items]
    g = file_graph(assign)
    print_graph(g, 'today')
    check_acyclic(g, 'today')


def check_tree():
    """The file graph of object/ and volume/ once the script ran."""
    assign = []
    for folder in (OBJ, VOL):
        for f in sorted(os.listdir(folder)):
            if f.endswith('.c'):
                p = f'{folder}/{f}'
                assign += [(p, it) for it in parse(read(p), p)[1]]
    g = file_graph(assign)
    print_graph(g, 'tree')
    return check_acyclic(g, 'tree')


def check_plan():
    placed = plan()
    g = file_graph([(it.home, it) for it in placed if it.home])
    print_graph(g, 'after')
    return check_acyclic(g, 'after'), placed


# --------------------------------------------------------------------------- apply

# Where a private definition of a source goes when another file needs it.
SHARED_HEADER = {
    'gateway/repair.c': 'object/repair.h',
    'gateway/volume.c': 'volume/volume_internal.h',
    'gateway/volume_delta.c': 'volume/volume_internal.h',
}
DEFAULT_SHARED = 'object/objects_internal.h'

# Mentions of a split file in the docs: where a reader now looks.
SPLIT_MENTIONS = {
    'gateway/objects.c': 'object/put.c, object/get.c',
    'gateway/cluster.c': 'object/open.c',
    'gateway/objmeta.c': 'object/meta_*.c',
    'gateway/repair.c': 'object/repair*.c',
    'gateway/detector.c': 'object/peer_state.c, object/detector.c',
    'gateway/volume.c': 'volume/volume.c',
}

TREE_DIRS = ['bench', 'cli', 'codecs', 'contrib', 'deg', 'docs', 'examples', 'fuzz', 'gateway',
             'inec', 'node', 'placement', 'scripts', 'tests', 'object', 'volume']


def first_clause(desc):
    one = re.sub(r'\s*\([^)]*\)', '', ' '.join(desc.split()))
    m = re.match(r"(.+?)(:|\. |\.$|;)", one)
    one = (m.group(1) if m else one)[:70].strip()
    return one[:1].upper() + one[1:]


def c_comment(text):
    lines = text.split('\n')
    if len(lines) == 1 and len(text) < 90:
        return f'/* {text} */'
    return '/*\n' + ''.join(f' * {l}'.rstrip() + '\n' for l in lines) + ' */'


def apply():
    ok, placed = check_plan()
    if not ok:
        die('the plan has cycles (above): fix the recipe')
    if os.path.exists(OBJ) or os.path.exists(VOL):
        die(f'{OBJ}/ or {VOL}/ exists already')
    publish, to_header = shared(placed)
    heads = {p: parse(read(p), p)[0] for p in layer_files()}
    desc = dict(FILES)
    titles = {}  # a file's idea in a few words, for the headers' groups
    for f, d in FILES:
        if d is None:
            src = [p for p in layer_files() if os.path.basename(p) == os.path.basename(f)]
            d = re.sub(r'^/\*+|\*/$|\n\s*\*', ' ', heads[src[0]]) if src and heads[src[0]] else None
        if d and d.startswith('@'):
            d = d.split('\n', 1)[1].replace('This file: ', '')
        titles[f] = first_clause(d) if d else None

    # new names must be free in the whole layer
    words = set()
    for p in layer_files() + [h for h in MOVES if h.endswith('.h')]:
        words |= set(IDENT.findall(mask(read(p))))
    folded = {d for d in publish if d.name in FOLDS.get(d.src, {})}
    for d, new in sorted(publish.items(), key=lambda x: x[1]):
        if new in words and d not in folded:
            die(f'{d.src}: {d.name} cannot become {new}: the name is taken')
        print(f'published: {d.src} {d.name} -> {new} ({d.home})')
    for d in to_header:
        print(f'to header: {d.src} {d.name} -> {SHARED_HEADER.get(d.src, DEFAULT_SHARED)}')
    renames = {}  # src -> {old: new}
    for d, new in publish.items():
        renames.setdefault(d.src, {})[d.name] = new
    for d in to_header:
        if d.kind in ('macro', 'struct') and d.name in RENAMES:
            renames.setdefault(d.src, {})[d.name] = RENAMES[d.name]

    def renamed(it, t):
        for old, new in renames.get(it.src, {}).items():
            if old in it.refs or old in it.names:
                t = rename_in(t, old, new)
        return t

    def text_of(it):
        t = renamed(it, it.full())
        if it in to_header and not it.lead:
            users = sorted(os.path.basename(u) for u in it.users | {it.home})
            t = f'/* Used by {", ".join(users[:-1])} and {users[-1]}. */\n' + t
        if it.kind == 'macro' and len(t.split('\n')[-1]) > 100 and '/*' in t.split('\n')[-1]:
            line = t.split('\n')[-1]
            code, comment = line.split('/*', 1)
            t = '\n'.join(t.split('\n')[:-1] + ['/*' + comment.rstrip(), code.rstrip()])
        if it in publish:
            t = re.sub(r'^((?:/\*.*?\*/\s*|//[^\n]*\n\s*)*)static\s+(inline\s+)?', r'\1', t,
                       count=1, flags=re.S)
        return t

    # names of the layer's headers, after the move (+ what they get now)
    hdr_names, hdr_own = {}, {}
    for h in [x for x in MOVES if x.endswith('.h')]:
        hdr_names[MOVES[h]] = set(header_names(h))
        hdr_own[MOVES[h]] = set(header_names(h, own=True))
    for d in to_header:
        both = d.names | {RENAMES[n] for n in d.names if n in RENAMES}
        hdr_names[SHARED_HEADER.get(d.src, DEFAULT_SHARED)] |= both
        hdr_own[SHARED_HEADER.get(d.src, DEFAULT_SHARED)] |= both
    for d, new in publish.items():
        hdr_names[SHARED_HEADER.get(d.src, DEFAULT_SHARED)].add(new)
        hdr_own[SHARED_HEADER.get(d.src, DEFAULT_SHARED)].add(new)
    for h in hdr_names:  # what a header includes, it offers
        for inc in re.findall(r'#include "([^"]+)"', read([k for k, v in MOVES.items() if v == h][0])):
            hdr_names[h] |= hdr_names.get(MOVES.get(inc, inc), set()) | header_names(inc)
    inc_map = {k: v for k, v in MOVES.items() if k.endswith('.h')}

    def new_include(line):
        m = re.match(r'#include "([^"]+)"', line)
        if m and m.group(1) in inc_map:
            return f'#include "{inc_map[m.group(1)]}"'
        return line

    def provides(inc_line, own):
        m = re.match(r'#include ([<"])([^>"]+)', inc_line)
        name = m.group(2)
        if m.group(1) == '"':
            if name in hdr_names:
                return hdr_own[name] if own else hdr_names[name]
            return header_names(name, own)
        return None

    def used(inc_lines, refs):
        """The includes a file needs: those declaring a name it uses, then any
        other that alone brings a name it uses (through its own includes)."""
        plain = {r.split(' ')[-1] for r in refs}
        keep = []
        for line in inc_lines:
            p = provides(line, True)
            if p is None:
                m = re.match(r'#include <([^>]+)>', line)
                if include_used('<' + m.group(1) + '>', plain):
                    keep.append(line)
            elif p & refs:
                keep.append(line)
        have = set()
        for line in keep:
            have |= provides(line, False) or set()
        for line in inc_lines:
            p = provides(line, False)
            if line not in keep and p is not None and (p & refs) - have:
                keep.append(line)
                have |= p
        return keep

    # ---- generate the .c files
    by_home = {}
    for it in placed:
        if it.home and it.home.endswith('.c') and it not in to_header:
            by_home.setdefault(it.home, []).append(it)
    src_order = layer_files()
    generated = {}
    for home, items in by_home.items():
        srcs = sorted({it.src for it in items}, key=src_order.index)
        items.sort(key=lambda it: (src_order.index(it.src), it.line))
        refs, own = set(), set()
        for it in items:
            t = text_of(it)
            refs |= refs_of(mask(t))
            own |= it.names | {renames.get(it.src, {}).get(n, n) for n in it.names}
        allrefs = refs | own
        # includes: those of its sources that it uses, then the layer's headers it needs
        cands = []
        for src in srcs:
            for it in parse(read(src), src)[1]:
                if it.kind == 'include' and new_include(it.text) not in cands:
                    cands.append(new_include(it.text))
        for h in sorted(hdr_names):
            line = f'#include "{h}"'
            if line not in cands and h.endswith('_internal.h') and h.split('/')[0] == home.split('/')[0]:
                cands.append(line)
        incs = used(cands, allrefs)
        # a file that moves keeps its includes as they were (others it now needs after them)
        kept = None
        for src in srcs:
            if MOVES.get(src) == home:
                lines = read(src).split('\n')
                at = [i for i, l in enumerate(lines) if l.startswith('#include')]
                kept = [new_include(l) for l in lines[at[0]:at[-1] + 1]
                        if l.startswith('#include') or not l.strip()] if at else []

                def names_of(line):
                    if line.startswith('#include <'):
                        return {r for r in allrefs if include_used(line[9:], {r.split(' ')[-1]})}
                    return (provides(line, False) or set()) & allrefs

                have = set().union(*(names_of(x) for x in kept if x))
                incs = [x for x in incs if x not in kept and names_of(x) - have]
        sysinc = sorted(x for x in incs if x.startswith('#include <') and '/' not in x[10:] or
                        x.startswith('#include <sys/'))
        libinc = sorted(x for x in incs if x.startswith('#include <') and x not in sysinc)
        projinc = sorted(x for x in incs if x.startswith('#include "'))
        # the file's comment
        sec_of = {(it.src, it.section): it for it in parse_sections(srcs)}
        d = desc.get(home)
        own_marker = None
        if d is None:
            same = [s for s in srcs if os.path.basename(s) == os.path.basename(home)]
            keys = {(it.src, it.section) for it in items if it.kind != 'macro'}
            marker = sec_of.get(next(iter(keys))) if len(keys) == 1 else None
            if same and heads[same[0]]:
                head = heads[same[0]]
            elif marker is not None and '\n' in marker.text.strip():
                # one section with a description: it is the file's comment
                own_marker = next(iter(keys))
                lines = marker.text.strip()[:-2].rstrip().split('\n')[1:]
                title = TITLE_PREFIX.get(marker.src, '') + marker.section
                head = ('/*\n * ' + title[0].upper() + title[1:] + '.\n *\n' +
                        '\n'.join(l.rstrip() for l in lines) + '\n */')
            else:
                die(f'{home}: FILES has no comment for it and no source of that name has one')
        elif d.startswith('@'):
            src, rest = d[1:].split('\n', 1)
            if not heads.get(src):
                die(f'{home}: FILES names the comment of {src}, which has none')
            head = heads[src][:-2].rstrip() + '\n *\n' + ''.join(f' * {l}'.rstrip() + '\n'
                                                             for l in rest.split('\n')) + ' */'
        else:
            head = c_comment(d)
        # forward declarations of private functions used before their definition
        defined_at, fwd = {}, []
        for idx, it in enumerate(items):
            if it.kind == 'func' and it.static and it not in publish:
                defined_at[it.name] = idx
        for idx, it in enumerate(items):
            for r in sorted(it.refs):
                j = defined_at.get(r)
                if j is not None and j > idx and r not in [f[0] for f in fwd]:
                    fwd.append((r, 'static ' + prototype(items[j], r, renamed(items[j], items[j].text))))
        blocks = [b for b in ('\n'.join(sysinc), '\n'.join(libinc), '\n'.join(projinc)) if b]
        body = []
        cur = None
        multi = len({(it.src, it.section) for it in items if it.kind != 'macro'}) > 1
        sec_items = {}
        for it in parse_sections(srcs):
            sec_items[(it.src, it.section)] = it
        section_size = {}
        for it in placed:
            if it.src in srcs and it.kind not in ('macro', 'section', 'include'):
                section_size[(it.src, it.section)] = section_size.get((it.src, it.section), 0) + 1
        if fwd:
            body.append((None, '\n'.join(p for _, p in fwd)))
        for it in items:
            key = (it.src, it.section)
            if key != cur:
                cur = key
                marker = sec_items.get(key)
                whole = sum(1 for x in items if (x.src, x.section) == key and x.kind != 'macro') * 2 > \
                    section_size.get(key, 0)
                if marker is not None and key != own_marker and whole and \
                        ('\n' in marker.text.strip() or multi):
                    body.append((None, marker.text))
            body.append((it, text_of(it)))
        if kept is not None:
            blocks = ['\n'.join(kept)] + (['\n'.join(incs)] if incs else [])
        text = head + '\n' + '\n\n'.join(blocks) + '\n\n' + join_items(body) + '\n'
        generated[home] = text

    for home, text in generated.items():
        if titles.get(home) is None:
            c = text[:text.index('*/')]
            titles[home] = first_clause(re.sub(r'^/\*+|\n\s*\*', ' ', c))

    # ---- headers: regroup prototypes, add the shared ones
    def_home = {}
    for it in placed:
        if it.kind == 'func' and it.home:
            def_home[renames.get(it.src, {}).get(it.name, it.name)] = it.home
    header_out = {}
    for h_old, h_new in MOVES.items():
        if not h_old.endswith('.h'):
            continue
        extra_types = [d for d in to_header if SHARED_HEADER.get(d.src, DEFAULT_SHARED) == h_new]
        extra_protos = [(d, n) for d, n in publish.items() if d not in folded
                        and SHARED_HEADER.get(d.src, DEFAULT_SHARED) == h_new]
        if h_old not in REGROUP:
            t = read(h_old)
            add = [text_of(d) for d in sorted(extra_types, key=lambda d: (d.src, d.line))]
            add += [prototype(d, n, renamed(d, d.text))
                    for d, n in sorted(extra_protos, key=lambda x: (x[0].src, x[0].line))]
            if add:
                at = t.rindex('#endif')
                t = t[:at] + '\n\n'.join(add) + '\n\n' + t[at:]
            header_out[h_new] = t
            continue
        header_out[h_new] = regroup(h_old, def_home, extra_types,
                                    [(d, n, renamed(d, d.text)) for d, n in extra_protos], text_of, titles)

    # ---- write everything
    for src in layer_files():
        base = os.path.basename(src)
        dst = MOVES.get(src)
        if dst is None:
            same = [h for h in by_home if os.path.basename(h) == base]
            dst = same[0] if same else None
        if dst:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            git('mv', src, dst)
        else:
            git('rm', '-q', src)
    for h_old, h_new in MOVES.items():
        if h_old.endswith('.h'):
            os.makedirs(os.path.dirname(h_new), exist_ok=True)
            git('mv', h_old, h_new)
            write(h_new, fix_guard(header_out[h_new], h_new))
    for home, text in generated.items():
        write(home, text)
    rewrite_tree(inc_map)
    for f, old, new in COMMENT_FIXES:
        t = read(f) if os.path.exists(f) else ''
        if old in t:
            write(f, t.replace(old, new))
        else:
            print(f'note: {f}: comment not found, left as it is: {old[:50]!r}')
    write_meson()
    subprocess.run(['clang-format', '-i'] + sorted(generated) + sorted(header_out), check=True)
    git('add', '-A', OBJ, VOL)
    git('add', '-u')
    left = subprocess.run(['git', 'grep', '-n', '-E', r'\b(objects|cluster|objmeta)\.c\b', '--',
                           OBJ, VOL], capture_output=True, text=True).stdout.splitlines()
    print(f'{len(left)} comment lines in {OBJ}/ and {VOL}/ still name a file that was split '
          f'(git grep -nE "\\b(objects|cluster|objmeta)\\.c\\b" {OBJ} {VOL})')
    # the graph of what was written, checked once more
    assign = []
    for f in sorted(generated):
        _, items, _ = parse(read(f), f)
        assign += [(f, it) for it in items]
    g = file_graph(assign)
    if not check_acyclic(g, 'written'):
        die('the files written call each other in a circle')
    print('done: now `meson setup --wipe build && meson compile -C build`')


def parse_sections(srcs):
    out = []
    for src in srcs:
        out += [it for it in parse(read(src), src)[1] if it.kind == 'section']
    return out


def fix_guard(text, path):
    guard = 'INEC_' + re.sub(r'[^A-Z0-9]', '_', path.upper())
    text = re.sub(r'#ifndef INEC_\w+_H\n#define INEC_\w+_H', f'#ifndef {guard}\n#define {guard}', text,
                  count=1)
    return text


def regroup(h_old, def_home, extra_types, extra_protos, text_of, titles):
    """The header with its prototypes grouped by the file that defines them."""
    text = read(h_old)
    head, items, _ = parse(text, h_old)
    first = next((i for i, it in enumerate(items) if it.kind == 'proto'), len(items))
    end = max(i for i, it in enumerate(items) if it.text.startswith('#endif'))
    pre, mid = items[:first], items[first:end]
    groups, riders = {}, []
    for it in mid:
        lead = []
        for c, blank in it.lead:
            flat = ' '.join(c.split())
            m = re.match(r'/\*\s*([a-z_]+\.c)\b[:,]?\s*(.*?)\s*\*/$', flat, re.S)
            if m:
                rest = m.group(2)
                if len(rest) < 60:
                    continue
                c = c.replace(m.group(1) + ': ', '', 1).replace(m.group(1) + ', ', '', 1)
                c = re.sub(r'^/\*(\s*)([a-z])', lambda x: '/*' + x.group(1) + x.group(2).upper(), c)
            lead.append((c, blank))
        it.lead = lead
        if it.kind != 'proto':
            riders.append(it)
            continue
        home = def_home.get(it.name)
        if home is None:
            die(f'{h_old}:{it.line}: {it.name} is declared but no file of the layer defines it')
        groups.setdefault(home, []).append(riders + [it])
        riders = []
    if riders:
        die(f'{h_old}: {riders} after the last prototype: place them by hand')
    body = [(it, new_inc(it.full())) for it in pre]
    if extra_types and not any(it.kind == 'include' and DEFAULT_SHARED in new_inc(it.text) for it in pre) \
            and not h_old.endswith(os.path.basename(DEFAULT_SHARED)):
        last = max(i for i, (it, _) in enumerate(body) if it.kind == 'include')
        body.insert(last + 1, (body[last][0], f'#include "{DEFAULT_SHARED}"'))
    for d in sorted(extra_types, key=lambda d: (d.src, d.line)):
        body.append((d, text_of(d)))
    for d, n, text in sorted(extra_protos, key=lambda x: (rank(x[0].home), x[0].src, x[0].line)):
        groups.setdefault(d.home, []).append([Item(kind='proto', name=n, text=prototype(d, n, text), lead=[])])
    for home in sorted(groups, key=rank):
        title = os.path.basename(home)
        d = titles.get(home)
        body.append((None, f'/* {title}: {d} */' if d else f'/* {title} */'))
        protos, prev = '', None
        for group in groups[home]:
            t = '\n'.join(x.full() for x in group)
            # a commented prototype stands apart; bare ones stay together
            sep = '\n\n' if group[0].lead or len(group) > 1 or (prev and (prev[0].lead or len(prev) > 1)) \
                else '\n'
            protos = protos + sep + t if protos else t
            prev = group
        body.append((None, protos))
    body.append((None, '#endif'))
    return (head + '\n' if head else '') + join_items(body) + '\n'


def join_items(body):
    """Items' texts, a blank line between definitions; consecutive one-line
    preprocessor lines (includes, macros) stay together as they were."""
    out = ''
    prev = None
    for it, t in body:
        tight = (it is not None and prev is not None and it.kind in ('include', 'macro', 'pp') and
                 prev.kind in ('include', 'macro', 'pp') and not it.lead and
                 (it.kind == prev.kind or it.kind == 'pp' or prev.kind == 'pp'))
        out += ('\n' if tight else '\n\n') + t if out else t
        prev = it
    return out


def new_inc(t):
    def sub(m):
        return f'#include "{MOVES.get(m.group(1), m.group(1))}"'
    return re.sub(r'#include "([^"]+)"', sub, t)


def rewrite_tree(inc_map):
    """#include lines and mentions of moved files, everywhere."""
    files = subprocess.run(['git', 'ls-files', '--'] + TREE_DIRS + ['README.md', 'meson.build'],
                           capture_output=True, text=True, check=True).stdout.split()
    moved = {k: v for k, v in MOVES.items()}
    for f in files:
        if not os.path.isfile(f) or f == 'scripts/restructure_objects.py':
            continue
        try:
            t = read(f)
        except UnicodeDecodeError:
            continue
        n = t
        for old, new in moved.items():
            n = re.sub(r'(?<![\w/])' + re.escape(old) + r'\b', new, n)
        if f.endswith('.md'):
            for old, new in SPLIT_MENTIONS.items():
                n = re.sub(r'(?<![\w/])' + re.escape(old) + r'\b', new, n)
        if n != t:
            write(f, n)


def write_meson():
    """gateway/meson.build loses the layer's sources; object/ and volume/ get theirs."""
    gm = read('gateway/meson.build')
    gone = [os.path.basename(p) for p in list(MOVES) + list(SPLITS) if p.endswith('.c')]
    for b in gone:
        gm = re.sub(r"\n\s*'" + re.escape(b) + r"',", '', gm)
    gm = re.sub(r"inec_sources \+= files\(\s*\)\n", '', gm)
    write('gateway/meson.build', gm)
    for folder, what in ((OBJ, 'The object layer (docs/DESIGN.md: lowest file first).'),
                         (VOL, 'Block volumes over objects.')):
        names = [os.path.basename(f) for f, _ in FILES if f.startswith(folder + '/') and os.path.exists(f)]
        write(f'{folder}/meson.build', f'# {what}\ninec_sources += files(\n' +
              ''.join(f"  '{n}',\n" for n in names) + ')\n')
    top = read('meson.build')
    if "subdir('object')" not in top:
        top = top.replace("subdir('gateway')", "subdir('object')\nsubdir('volume')\nsubdir('gateway')", 1)
        write('meson.build', top)
    ut = 'tests/unit/meson.build'
    t = read(ut)
    t = re.sub(r"('gw_(objects|layout|multipart)': )'gateway'", r"\1'object'", t)
    write(ut, t)


if __name__ == '__main__':
    if '--check' in sys.argv:
        check_today()
        sys.exit(0)
    if '--check-tree' in sys.argv:
        sys.exit(0 if check_tree() else 1)
    if '--dry-run' in sys.argv:
        sys.exit(0 if check_plan()[0] else 1)
    if subprocess.run(['git', 'status', '--porcelain', '--untracked-files=no'], capture_output=True,
                      text=True).stdout.strip():
        die('the work tree has changes: commit or stash them first')
    apply()
