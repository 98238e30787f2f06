// sg-fakemodel's rate limiter and failing-first upstream, read by the
// official openai and @anthropic-ai/sdk clients (pinned in package.json)
// with their own retries on: each SDK must treat the fake's 429 - its
// retry-after-ms, its retry-after - as it treats the real providers' (the
// Stainless retry code both share: retry-after-ms first, then retry-after
// in seconds; openai-node ignores a wait above 60 s and backs off by
// itself), raise its RateLimitError from the fake's error body, and
// retry a failing upstream until it recovers.
//
// Every request the SDK makes goes through a recording fetch (the SDKs'
// `fetch` option): when it left, when its response came, its status and
// retry headers, its X-Stainless-Retry-Count.  The wait an SDK took is
// the time from a 429's response to the next request, measured with
// performance.now() and held to the header's value.
//
// Prints one "ok: ..." or "FAIL: ..." line per check; exits 1 if any failed.
// Usage: node limits_check.mjs FAKEMODEL_URL
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { check, exitCode } from './checklines.mjs';

const base = process.argv[2];
// how late after the header's time an SDK's retry may leave: its timer,
// its reading of the 429, one loopback request (a loaded 2-core box)
const SLACK_MS = 250;
// Node's timers may fire up to a millisecond early (they round)
const EARLY_MS = 2;

// A fetch that records every request an SDK makes through it.
function recordingFetch() {
  const log = [];
  const f = async (url, init) => {
    const entry = {
      sentAt: performance.now(),
      retryCount: new Headers(init?.headers).get('x-stainless-retry-count'),
    };
    log.push(entry);
    const res = await fetch(url, init);
    entry.at = performance.now();
    entry.status = res.status;
    entry.retryAfter = res.headers.get('retry-after');
    entry.retryAfterMs = res.headers.get('retry-after-ms');
    return res;
  };
  f.log = log;
  return f;
}

// The wait between the response of request i and the next request.
const waitAfter = (log, i) => log[i + 1].sentAt - log[i].at;

let seq = 0;
const tag = (name) => `${name}-${process.pid}-${(seq += 1)}`;

function openaiClient(scenario, maxRetries, f) {
  return new OpenAI({
    baseURL: `${base}/v1`,
    apiKey: 'sk-test',
    maxRetries,
    fetch: f,
    defaultHeaders: { 'X-SG-Scenario': scenario },
  });
}

function anthropicClient(scenario, maxRetries, f) {
  return new Anthropic({
    baseURL: base,
    apiKey: 'sk-ant-test',
    maxRetries,
    fetch: f,
    defaultHeaders: { 'X-SG-Scenario': scenario },
  });
}

// One streamed answer through each SDK: its text, and the SDK's own view
// of the response's headers.
const sdks = {
  openai: {
    client: openaiClient,
    async ask(client) {
      const { data: stream, response } = await client.chat.completions
        .create({ model: 'sg-fakemodel', messages: [{ role: 'user', content: 'hi' }], stream: true })
        .withResponse();
      let text = '';
      for await (const chunk of stream) {
        text += chunk.choices?.[0]?.delta?.content ?? '';
      }
      return { text, headers: response.headers };
    },
  },
  anthropic: {
    client: anthropicClient,
    async ask(client) {
      const { data: stream, response } = await client.messages
        .create({
          model: 'sg-fakemodel',
          max_tokens: 64,
          messages: [{ role: 'user', content: 'hi' }],
          stream: true,
        })
        .withResponse();
      let text = '';
      for await (const ev of stream) {
        if (ev.type === 'content_block_delta' && ev.delta?.type === 'text_delta') {
          text += ev.delta.text;
        }
      }
      return { text, headers: response.headers };
    },
  },
};

// Asks twice: the first answer spends the window, the second is refused.
// Returns the error the second raised (null: none).
async function secondRaises(sdk, client) {
  await sdks[sdk].ask(client);
  try {
    await sdks[sdk].ask(client);
  } catch (e) {
    return e;
  }
  return null;
}

// The first answer spends the window's only request; the second is
// refused with a 429, which the SDK (maxRetries 2) waits out by the header
// it reads - @use, 'ms' or 's' - and then is served in a new window.
async function retriesAfterThe429(sdk, style, use) {
  const key = tag(`rl-${sdk}-${style}`);
  const scenario = `n=2&gap=0&rl_requests=1&rl_window=1200&rl_key=${key}&rl_style=${style}`;
  const f = recordingFetch();
  const { client, ask } = sdks[sdk];
  const c = client(scenario, 2, f);
  const what = `${sdk} SDK, ${style}-style 429`;
  const first = await ask(c);
  check(`${what}: the first answer streams, its headers read through the SDK`,
    first.text === 'tok0tok1' &&
      (style === 'openai'
        ? first.headers.get('x-ratelimit-remaining-requests') === '0' &&
          first.headers.get('x-ratelimit-reset-requests') === '1.2s'
        : first.headers.get('anthropic-ratelimit-requests-remaining') === '0' &&
          /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/.test(
            first.headers.get('anthropic-ratelimit-requests-reset'))),
    { text: first.text, remaining: first.headers.get(`${style === 'openai' ? 'x-ratelimit-remaining-requests' : 'anthropic-ratelimit-requests-remaining'}`) });
  const t0 = f.log.length;
  const second = await ask(c);
  const log = f.log.slice(t0);
  check(`${what}: refused once, retried once, then served`,
    second.text === 'tok0tok1' && log.length === 2 && log[0].status === 429 &&
      log[1].status === 200 && log[0].retryCount === '0' && log[1].retryCount === '1',
    log);
  if (log.length !== 2 || log[0].status !== 429) {
    return;
  }
  const ms = Number(log[0].retryAfterMs);
  const s = Number(log[0].retryAfter);
  check(`${what}: retry-after in whole seconds, rounded up` +
    (style === 'openai' ? ', beside retry-after-ms' : ', alone'),
    style === 'openai' ? ms > 0 && s === Math.ceil(ms / 1000) : log[0].retryAfterMs === null && s >= 1,
    log[0]);
  const want = use === 'ms' ? ms : s * 1000;
  const waited = waitAfter(log, 0);
  check(`${what}: the SDK waited the ${use === 'ms' ? 'retry-after-ms' : 'retry-after'} ` +
    `it was given (${want} ms; waited ${waited.toFixed(1)} ms)`,
    waited >= want - EARLY_MS && waited <= want + SLACK_MS &&
      // retry-after-ms wins over retry-after's whole seconds
      (use !== 'ms' || s * 1000 - ms < SLACK_MS || waited < s * 1000 - EARLY_MS),
    { want, waited, ms, s });
}

// openai-node takes no server wait above 60 s: it backs off by itself
// (0.5 s less up to 25 % jitter for the first retry), and with maxRetries
// 1 raises the second 429 as its RateLimitError, read from the fake's body.
async function openaiIgnoresWaitsAboveAMinute() {
  const key = tag('rl-openai-long');
  const f = recordingFetch();
  const c = openaiClient(`n=1&rl_requests=1&rl_window=90000&rl_key=${key}`, 1, f);
  const err = await secondRaises('openai', c);
  const log = f.log.slice(1);
  const waited = log.length === 2 ? waitAfter(log, 0) : NaN;
  check('openai SDK: retry-after-ms above 60 s ignored, its own backoff taken ' +
    `(${log[0]?.retryAfterMs} ms said; waited ${waited.toFixed(1)} ms)`,
    log.length === 2 && Number(log[0].retryAfterMs) > 60000 &&
      waited >= 375 - EARLY_MS && waited <= 500 + SLACK_MS, log);
  check('openai SDK: the 429 raised as RateLimitError with the fake\'s type and code',
    err?.constructor?.name === 'RateLimitError' && err.status === 429 &&
      err.code === 'rate_limit_exceeded' && err.type === 'requests' &&
      /^Rate limit reached for sg-fakemodel on requests per 90000 ms/.test(err.error?.message ?? ''),
    { class: err?.constructor?.name, status: err?.status, code: err?.code, type: err?.type });
}

// The tokens limit, through the SDK: the 429 says which limit was passed.
async function refusalsRaisedAsRateLimitErrors() {
  const f = recordingFetch();
  const key = tag('rl-openai-tokens');
  const c = openaiClient(`n=20&prompt_tokens=10&rl_tokens=50&rl_key=${key}`, 0, f);
  let err = await secondRaises('openai', c);
  check('openai SDK: a tokens-limit 429 raised as RateLimitError, type tokens, no retry',
    err?.constructor?.name === 'RateLimitError' && err.type === 'tokens' &&
      err.code === 'rate_limit_exceeded' && f.log.length === 2 &&
      err.headers?.get('x-ratelimit-remaining-tokens') === '20',
    { class: err?.constructor?.name, type: err?.type, requests: f.log.length });
  const g = recordingFetch();
  const a = anthropicClient(`n=1&rl_requests=1&rl_key=${tag('rl-ant-err')}`, 0, g);
  err = await secondRaises('anthropic', a);
  check('@anthropic-ai/sdk: the 429 raised as RateLimitError, error type rate_limit_error',
    err?.constructor?.name === 'RateLimitError' && err.status === 429 &&
      err.error?.error?.type === 'rate_limit_error' && err.headers?.get('retry-after') === '60',
    { class: err?.constructor?.name, error: err?.error });
}

// An upstream that fails N times then recovers: the SDK retries (its own
// backoff, or a reconnect after a reset) until the fake serves it.
async function retriesUntilTheUpstreamRecovers(sdk, failure, n) {
  const key = tag(`ff-${sdk}`);
  const f = recordingFetch();
  const c = sdks[sdk].client(`n=2&gap=0&${failure}&fail_first=${n}&fail_key=${key}`, 3, f);
  let text = null;
  let err = null;
  try {
    text = (await sdks[sdk].ask(c)).text;
  } catch (e) {
    err = e;
  }
  const statuses = f.log.map((e) => e.status ?? 'connection error');
  check(`${sdk} SDK: ${failure} for the first ${n}, then served (${statuses.join(', ')})`,
    text === 'tok0tok1' && f.log.length === n + 1 && f.log[n].status === 200 &&
      f.log.every((e, i) => e.retryCount === String(i)),
    { text, error: String(err), log: f.log });
}

// A case that throws where no check expected it fails, and the rest run.
async function run(what, fn) {
  try {
    await fn();
  } catch (e) {
    check(what, false, `${e?.constructor?.name}: ${String(e?.message ?? e).slice(0, 200)}`);
  }
}

await run('openai SDK, openai-style 429', () => retriesAfterThe429('openai', 'openai', 'ms'));
await run('openai SDK, anthropic-style 429', () => retriesAfterThe429('openai', 'anthropic', 's'));
await run('anthropic SDK, anthropic-style 429', () => retriesAfterThe429('anthropic', 'anthropic', 's'));
await run('anthropic SDK, openai-style 429', () => retriesAfterThe429('anthropic', 'openai', 'ms'));
await run('openai SDK, a wait above 60 s', openaiIgnoresWaitsAboveAMinute);
await run('RateLimitErrors', refusalsRaisedAsRateLimitErrors);
await run('openai SDK, 503 twice', () => retriesUntilTheUpstreamRecovers('openai', 'status=503', 2));
await run('anthropic SDK, 529 once', () => retriesUntilTheUpstreamRecovers('anthropic', 'status=529', 1));
await run('openai SDK, reset once', () => retriesUntilTheUpstreamRecovers('openai', 'reset=1', 1));
await run('anthropic SDK, reset once', () => retriesUntilTheUpstreamRecovers('anthropic', 'reset=1', 1));
process.exit(exitCode());
