#!/usr/bin/env node
// Peer driver: node-redlock (npm `redlock`, with ioredis) in dlock-bench's scenarios 2 and 3.
// A comparison tool only: installed by `make bench-peers` into bench/peers/node_modules.
//
// Prints one JSON document on stdout (fields: bench/peers/README.md); dlock-bench
// --peer-results merges it into its table, judged by the same targets as dlock.
//
//   2 uncontended  acquire+release pairs/s on distinct keys, N concurrent callers (Node has no
//                  caller threads: async loops) sharing one ioredis client and one Redlock
//   3 contended    8 workers in >= 2 processes (child_process.fork, each its own client), one
//                  key, each holding 1 ms then asking again
//
// Settings: Redlock's defaults (driftFactor 0.01, retryDelay 200 ms, retryJitter as shipped),
// except retryCount: -1, which its README documents as "unlimited retries until the lock is
// acquired" — what a worker that must get the lock uses (the default, 10, makes acquire fail
// after ~2 s and the worker would simply ask again). TTL 30 s, as dlock's default lease.
//
// Handoff latency: release issued -> the next worker's acquire returning, on CLOCK_MONOTONIC
// (process.hrtime.bigint), merged from every worker's log in time order as the Python driver does.
'use strict';

const { fork } = require('child_process');
const path = require('path');

let Redis, Redlock;
try {
  Redis = require('ioredis');
  Redlock = require('redlock');
} catch (e) {
  console.log(JSON.stringify({ library: 'node-redlock', slug: 'node-redlock', skipped:
    'redlock/ioredis not installed in bench/peers/node_modules (make bench-peers installs them; npm unreachable?)' }));
  process.exit(0);
}

const TTL = 30000;
const nowNs = () => process.hrtime.bigint();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function parseArgs(argv) {
  const a = { repeats: 3, threads: '1,8,64', processes: '2', workers: 8, holdUs: 1000 };
  for (let i = 2; i < argv.length; i++) {
    const k = argv[i];
    const v = () => argv[++i];
    if (k === '--redis') a.redis = v();
    else if (k === '--quick') a.quick = true;
    else if (k === '--repeats') a.repeats = Number(v());
    else if (k === '--warmup') a.warmup = Number(v());
    else if (k === '--duration') a.duration = Number(v());
    else if (k === '--contended-seconds') a.contended = Number(v());
    else if (k === '--threads') a.threads = v();
    else if (k === '--contended-processes') a.processes = v();
    else if (k === '--contended-workers') a.workers = Number(v());
    else if (k === '--hold-us') a.holdUs = Number(v());
    else if (k === '--samples') a.samples = v();
    else if (k === '--worker') a.worker = v();  // internal: a forked contended process
    else throw new Error('unknown argument ' + k);
  }
  if (!a.redis) throw new Error('--redis URL is required');
  a.warmup = a.warmup ?? (a.quick ? 0.2 : 0.5);
  a.duration = a.duration ?? (a.quick ? 1 : 3);
  a.contended = a.contended ?? (a.quick ? 2 : 5);
  return a;
}

function makeRedlock(client) {
  return new Redlock([client], { retryCount: -1 });
}

async function commandstats(admin) {
  const text = await admin.info('commandstats');
  const out = {};
  for (const line of text.split('\n')) {
    const m = /^cmdstat_([^:]+):calls=(\d+)/.exec(line);
    if (m) out[m[1]] = Number(m[2]);
  }
  return out;
}

function delta(before, after) {
  const d = {};
  for (const k of Object.keys(after)) if (after[k] > (before[k] || 0)) d[k] = after[k] - (before[k] || 0);
  return d;
}

function scriptCommands(redlock) {
  const names = new Set();
  for (const s of [redlock.lockScript, redlock.unlockScript, redlock.extendScript]) {
    for (const m of String(s).matchAll(/redis\.p?call\(\s*["'](\w+)["']/g)) names.add(m[1].toLowerCase());
  }
  return [...names].sort();
}

function quantile(sorted, q) {
  if (sorted.length === 0) return 0;
  const i = Math.max(0, Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1));
  return sorted[i];
}

// --- scenario 2 ---------------------------------------------------------------------------

async function uncontended(url, callers, warmup, duration) {
  const client = new Redis(url);
  const admin = new Redis(url);
  const redlock = makeRedlock(client);
  let count = 0;
  let errors = 0;
  let stop = false;
  const loops = [];
  for (let i = 0; i < callers; i++) {
    loops.push((async () => {
      const key = 'bench:node:u:' + i;
      while (!stop) {
        try {
          const lock = await redlock.lock(key, TTL);
          await lock.unlock();
          count++;
        } catch (e) {
          errors++;
          await sleep(10);
        }
      }
    })());
  }
  await sleep(warmup * 1000);
  const before = await commandstats(admin);
  const c0 = count;
  const t0 = nowNs();
  await sleep(duration * 1000);
  const c1 = count;
  const t1 = nowNs();
  const after = await commandstats(admin);
  stop = true;
  await Promise.all(loops);
  client.disconnect();
  admin.disconnect();
  const pairs = c1 - c0;
  return { pairs_per_second: pairs / (Number(t1 - t0) / 1e9), pairs, errors, commands: delta(before, after) };
}

// --- scenario 3 ---------------------------------------------------------------------------

// A forked worker process: its own client, its share of the workers, a log of
// [acquired, release issued] per worker, sent to the parent at the end.
async function workerProcess(a) {
  const [proc, processes] = a.worker.split('/').map(Number);
  const client = new Redis(a.redis);
  const redlock = makeRedlock(client);
  await client.ping();
  let go = false;
  let stop = false;
  process.on('message', (m) => {
    if (m === 'go') go = true;
    if (m === 'stop') stop = true;
  });
  process.send({ ready: true });
  while (!go) await sleep(1);
  const logs = {};
  let errors = 0;
  const mine = [];
  for (let w = 0; w < a.workers; w++) if (w % processes === proc) mine.push(w);
  await Promise.all(mine.map(async (w) => {
    const log = (logs[w] = []);
    while (!stop) {
      let lock;
      try {
        lock = await redlock.lock('bench:node:contended', TTL);
      } catch (e) {
        errors++;
        continue;
      }
      const acquired = nowNs();
      await sleep(a.holdUs / 1000);
      const released = nowNs();
      log.push([String(acquired), String(released)]);
      try {
        await lock.unlock();
      } catch (e) {
        errors++;
      }
    }
  }));
  process.send({ logs, errors }, () => {
    client.disconnect();
    process.exit(0);
  });
}

async function contended(a, processes) {
  const admin = new Redis(a.redis);
  await admin.del('bench:node:contended');
  const children = [];
  for (let p = 0; p < processes; p++) {
    const child = fork(__filename, [...process.argv.slice(2).filter((x) => x !== '--quick'), '--worker', `${p}/${processes}`],
      { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    const state = { child, ready: false, result: null };
    state.done = new Promise((resolve, reject) => {
      child.on('message', (m) => {
        if (m.ready) state.ready = true;
        if (m.logs) { state.result = m; resolve(); }
      });
      child.on('exit', (code) => (state.result ? resolve() : reject(new Error('worker process exited with ' + code))));
    });
    children.push(state);
  }
  while (!children.every((c) => c.ready)) await sleep(5);
  for (const c of children) c.child.send('go');
  await sleep(a.warmup * 1000);
  const before = await commandstats(admin);
  const t0 = nowNs();
  await sleep(a.contended * 1000);
  const t1 = nowNs();
  const after = await commandstats(admin);
  for (const c of children) c.child.send('stop');
  await Promise.race([Promise.all(children.map((c) => c.done)), sleep(30000)]);
  for (const c of children) if (!c.result) c.child.kill('SIGKILL');
  admin.disconnect();

  const events = [];
  let errors = 0;
  for (const c of children) {
    if (!c.result) throw new Error('a contended worker process left no results');
    errors += c.result.errors;
    for (const [w, log] of Object.entries(c.result.logs)) {
      for (const [acq, rel] of log) events.push([BigInt(acq), BigInt(rel), Number(w)]);
    }
  }
  events.sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0));
  const perWorker = new Array(a.workers).fill(0);
  let held = 0n;
  let overlaps = 0;
  const handoffs = [];
  events.forEach(([acq, rel, w], i) => {
    if (acq < t0 || acq > t1) return;
    perWorker[w]++;
    held += rel - acq;
    if (i > 0) {
      const [, prel, pw] = events[i - 1];
      if (prel > acq) overlaps++;
      else if (pw !== w) handoffs.push(Number(acq - prel) / 1e3);
    }
  });
  handoffs.sort((x, y) => x - y);
  const n = perWorker.reduce((s, x) => s + x, 0);
  const span = Number(t1 - t0);
  const maxW = Math.max(...perWorker);
  return {
    acquisitions_per_second: n / (span / 1e9),
    acquisitions: n,
    utilisation: Number(held) / span,
    handoff_p50_us: quantile(handoffs, 0.5),
    handoff_p99_us: quantile(handoffs, 0.99),
    handoff_max_us: handoffs.length ? handoffs[handoffs.length - 1] : 0,
    fairness: maxW ? Math.min(...perWorker) / maxW : 0,
    per_worker: perWorker,
    overlaps,
    errors,
    commands: delta(before, after),
    handoff_samples_us: handoffs,
  };
}

async function main() {
  const a = parseArgs(process.argv);
  if (a.worker) return workerProcess(a);
  const probe = makeRedlock(new Redis(a.redis, { lazyConnect: true }));
  const doc = {
    library: 'node-redlock',
    slug: 'node-redlock',
    callers_word: 'concurrent caller',
    version: require('redlock/package.json').version + ' (ioredis ' + require('ioredis/package.json').version + ')',
    settings: 'Redlock defaults (driftFactor 0.01, retryDelay ' + probe.retryDelay + ' ms, retryJitter ' +
      probe.retryJitter + ' ms) with retryCount -1 (documented: retry until acquired); TTL 30 s; one ioredis client per process',
    script_commands: scriptCommands(probe),
    uncontended: [],
    contended: [],
  };
  for (const t of a.threads.split(',').map(Number)) {
    const runs = [];
    for (let r = 0; r < a.repeats; r++) {
      const res = await uncontended(a.redis, t, a.warmup, a.duration);
      console.error(`  node-redlock uncontended ${t} callers: ${res.pairs_per_second.toFixed(0)} pairs/s`);
      runs.push(res);
    }
    doc.uncontended.push({ callers: t, runs });
  }
  const samples = [];
  for (const p of a.processes.split(',').map(Number)) {
    const runs = [];
    for (let r = 0; r < a.repeats; r++) {
      const res = await contended(a, p);
      samples.push(...res.handoff_samples_us);
      delete res.handoff_samples_us;
      console.error(`  node-redlock contended ${p} processes: ${res.acquisitions_per_second.toFixed(0)} acq/s, ` +
        `util ${(100 * res.utilisation).toFixed(1)}%, p50 ${res.handoff_p50_us.toFixed(0)} us, ` +
        `p99 ${res.handoff_p99_us.toFixed(0)} us, fairness ${res.fairness.toFixed(2)}`);
      runs.push(res);
    }
    doc.contended.push({ processes: p, workers: a.workers, runs });
  }
  if (a.samples) require('fs').writeFileSync(a.samples, samples.map((s) => s.toFixed(1)).join('\n') + (samples.length ? '\n' : ''));
  console.log(JSON.stringify(doc));
}

main().catch((e) => {
  console.error('node-redlock driver: ' + (e && e.stack ? e.stack : e));
  process.exit(1);
});
