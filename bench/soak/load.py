"""The steady load: processes of threads that acquire every target in turn at a set pace,
spread over the instances, and report what they were answered once a second."""

import collections
import http.client
import json
import math
import multiprocessing
import os
import random
import threading
import time

from limits import targets

# Latency buckets: 0.1 ms growing by 10% (bucket i holds up to 0.1 ms x 1.1^i).
def latency_bucket(seconds):
    return max(0, math.ceil(math.log(max(seconds, 1e-4) / 1e-4, 1.1)))


def latency_of(bucket):
    return 1e-4 * 1.1 ** bucket


class Tally:
    """What one process saw since its last report."""

    def __init__(self):
        self.answers = collections.Counter()   # (minute, policy, label) -> n
        self.seconds = collections.Counter()   # (second answered, label) -> n
        self.grants = collections.Counter()    # (bucket, send second, answer second) -> n
        self.latency = collections.Counter()   # (minute, latency bucket) -> n
        self.odd = []                          # (time, instance, policy, label, excerpt)

    def take(self):
        out = (self.answers, self.seconds, self.grants, self.latency, self.odd)
        self.__init__()
        return out


def label_of(status, body):
    if status == 200 and b'"degraded":true' in body:
        return "200 degraded"
    if status == 200 and b'"enforced":false' in body:
        return "200 not enforced"
    return str(status)


def worker(tally, lock, stop, started, instances, keys, pace, seed):
    rng = random.Random(seed)
    mine = targets()
    rng.shuffle(mine)
    conns = {}
    slot = time.monotonic()
    turn = 0
    while not stop.is_set():
        slot += pace
        wait = slot - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        elif wait < -1:  # far behind (a stalled instance): do not fire a backlog
            slot = time.monotonic()
        target = mine[turn % len(mine)]
        # The next instance each time: a connection idle for longer than the server's
        # keep-alive (5 s) would be closed under the client, as it may be.
        instance = (turn + seed) % len(instances)
        turn += 1
        body = {"resource": target["policy"]}
        if target["key"]:
            body["key"] = target["key"]
        headers = {"Authorization": "Bearer " + keys[target["app"]],
                   "Content-Type": "application/json"}
        sent = time.time()
        try:
            conn = conns.get(instance)
            if conn is None:
                conn = conns[instance] = http.client.HTTPConnection(
                    "127.0.0.1", instances[instance], timeout=10)
            conn.request("POST", "/v1/acquire", json.dumps(body), headers)
            response = conn.getresponse()
            status, data = response.status, response.read()
            label = label_of(status, data)
        except (OSError, http.client.HTTPException) as error:
            conns.pop(instance, None)
            status, label, data = 0, "no answer", str(error).encode()
        answered = time.time()
        minute = int((answered - started) // 60)
        with lock:
            tally.answers[(minute, target["policy"], label)] += 1
            tally.seconds[(int(answered), label)] += 1
            tally.latency[(minute, latency_bucket(answered - sent))] += 1
            if label == "200":
                tally.grants[(target["bucket"], int(sent), int(answered))] += 1
            # A fail-closed policy's 503 is its failure mode: counted, never odd.
            expected = status in (200, 429) or (status == 503 and target["mode"] == "closed")
            if not expected and len(tally.odd) < 2000:
                tally.odd.append((answered, instance, target["policy"], target["mode"], label,
                                  data[:200].decode(errors="replace")))


def process_main(queue, stop, started, instances, keys_file, rate, threads, seed):
    tally, lock = Tally(), threading.Lock()
    keys = {}
    keys_mtime = None
    thread_stop = threading.Event()

    def read_keys():
        nonlocal keys_mtime
        mtime = os.stat(keys_file).st_mtime_ns
        if mtime != keys_mtime:
            with open(keys_file) as f:
                keys.update(json.load(f))
            keys_mtime = mtime

    read_keys()
    pool = [threading.Thread(target=worker, daemon=True,
                             args=(tally, lock, thread_stop, started, instances, keys,
                                   threads / rate, seed * 100 + n))
            for n in range(threads)]
    for t in pool:
        t.start()
    while not stop.is_set():
        time.sleep(1)
        read_keys()
        with lock:
            queue.put(tally.take())
    thread_stop.set()
    for t in pool:
        t.join(timeout=15)
    with lock:
        queue.put(tally.take())
    queue.put(None)


class Load:
    def __init__(self, started, instance_ports, keys_file, rate, processes=2, threads=8):
        self.finished = 0  # processes that sent their last report
        # Forked, so the processes share the soak's modules without importing them again.
        context = multiprocessing.get_context("fork")
        self.queue = context.Queue()
        self.stop_event = context.Event()
        self.procs = [context.Process(
            target=process_main, daemon=True,
            args=(self.queue, self.stop_event, started, instance_ports, keys_file,
                  rate / processes, threads, seed))
            for seed in range(processes)]
        for p in self.procs:
            p.start()

    def drain(self, into):
        """Merges every report waiting into `into` (a Tally); False once all are done."""
        while True:
            try:
                report = self.queue.get(timeout=0.05)
            except Exception:  # noqa: BLE001 - queue.Empty
                return
            if report is None:
                self.finished += 1
                continue
            answers, seconds, grants, latency, odd = report
            into.answers.update(answers)
            into.seconds.update(seconds)
            into.grants.update(grants)
            into.latency.update(latency)
            into.odd.extend(odd)

    def stop(self, into):
        self.stop_event.set()
        deadline = time.monotonic() + 30
        while self.finished < len(self.procs) and time.monotonic() < deadline:
            self.drain(into)
        for p in self.procs:
            p.join(timeout=5)
