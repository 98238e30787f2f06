// sg-proxy's endpoint health read by the official SDKs (openai,
// @anthropic-ai/sdk; pinned in package.json): a request the proxy refuses
// locally - the upstream's rate-limit headers said nothing remains until a
// reset - is raised as the SDK's RateLimitError; and with the SDK's
// default retries (2) it waits the retry-after-ms the proxy gave (its
// x-should-retry: true lets it retry) and is then served: two requests to
// the proxy, one upstream, no 429 upstream - not a retry storm of 429s.
//
// Each SDK request goes through a recording fetch (the SDKs' `fetch`
// option): when it left, when its answer came, its status and headers.
// What reached the upstream is read from sg-fakemodel's /_stats
// (received, rate_limited), before and after each step.
//
// Prints one "ok: ..." or "FAIL: ..." line per check; exits 1 if any failed.
// Usage: node proxy_health_check.mjs OPENAI_PROXY_URL ANTHROPIC_PROXY_URL FAKEMODEL_URL
//   (both proxies with --budget 2s --attempts 1: a wait of 4 s does not fit)
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { check, exitCode } from './checklines.mjs';

const [openaiProxy, anthropicProxy, fakemodel] = process.argv.slice(2);
// how late after the header's time an SDK's retry may leave (its timer,
// its reading of the 429, one loopback request on a loaded 2-core box)
const SLACK_MS = 250;
const EARLY_MS = 2; // Node's timers may fire up to a millisecond early
const WINDOW_MS = 4000;

async function stats() {
  const r = await fetch(`${fakemodel}/_stats`);
  return r.json();
}

function recordingFetch() {
  const log = [];
  const f = async (url, init) => {
    const entry = { sentAt: performance.now() };
    log.push(entry);
    const res = await fetch(url, init);
    entry.at = performance.now();
    entry.status = res.status;
    for (const h of ['retry-after', 'retry-after-ms', 'x-sg-reason', 'x-sg-outcome', 'x-should-retry']) {
      entry[h] = res.headers.get(h);
    }
    return res;
  };
  f.log = log;
  return f;
}

// maxRetries when given; undefined: the SDK's own default (2)
const retries = (n) => (n === undefined ? {} : { maxRetries: n });

const sdks = {
  openai: {
    client: (scenario, maxRetries, f) =>
      new OpenAI({
        baseURL: `${openaiProxy}/v1`,
        apiKey: 'sk-proxy-health-1',
        ...retries(maxRetries),
        fetch: f,
        defaultHeaders: { 'X-SG-Scenario': scenario },
      }),
    async ask(client) {
      const stream = await client.chat.completions.create({
        model: 'sg-fakemodel',
        messages: [{ role: 'user', content: 'hi' }],
        stream: true,
      });
      let text = '';
      for await (const chunk of stream) {
        text += chunk.choices?.[0]?.delta?.content ?? '';
      }
      return text;
    },
    // the proxy's body: OpenAI's requests-limit error
    typed: (e) => e.type === 'requests' && e.code === 'rate_limit_exceeded',
  },
  anthropic: {
    client: (scenario, maxRetries, f) =>
      new Anthropic({
        baseURL: anthropicProxy,
        apiKey: 'sk-ant-proxy-health-2',
        ...retries(maxRetries),
        fetch: f,
        defaultHeaders: { 'X-SG-Scenario': scenario },
      }),
    async ask(client) {
      const stream = await client.messages.create({
        model: 'sg-fakemodel',
        max_tokens: 64,
        messages: [{ role: 'user', content: 'hi' }],
        stream: true,
      });
      let text = '';
      for await (const ev of stream) {
        if (ev.type === 'content_block_delta' && ev.delta?.type === 'text_delta') {
          text += ev.delta.text;
        }
      }
      return text;
    },
    typed: (e) => e.error?.error?.type === 'rate_limit_error',
  },
};

async function attempt(sdk, client) {
  try {
    return { text: await sdks[sdk].ask(client) };
  } catch (e) {
    return { error: e };
  }
}

async function refusedLocally(sdk) {
  const scenario = `n=2&gap=0&rl_requests=1&rl_window=${WINDOW_MS}&rl_key=ph-${sdk}-${process.pid}`;
  const f = recordingFetch();
  const c = sdks[sdk].client(scenario, 0, f);
  const s0 = await stats();
  const first = await attempt(sdk, c);
  check(`${sdk} SDK: the first request spends the upstream's window and streams`,
    first.text === 'tok0tok1', String(first.error ?? first.text));
  // the window's headers said 0 requests remain: the next is the proxy's
  const s1 = await stats();
  const second = await attempt(sdk, c);
  const e = second.error;
  const s2 = await stats();
  check(`${sdk} SDK: the proxy's local 429 raised as RateLimitError, of the provider's type`,
    e?.constructor?.name === 'RateLimitError' && e.status === 429 && sdks[sdk].typed(e) &&
      e.headers?.get('x-sg-reason') === 'rate_limited' &&
      e.headers?.get('x-sg-outcome') === 'refused',
    { class: e?.constructor?.name, status: e?.status, error: e?.error, text: second.text });
  check(`${sdk} SDK: ... and nothing of it went upstream`,
    s1.received - s0.received === 1 && s2.received === s1.received && s2.rate_limited === s0.rate_limited,
    { s0, s1, s2 });

  // the SDK's default retries: it waits what the proxy said, then is served
  const g = recordingFetch();
  const d = sdks[sdk].client(scenario, undefined, g);
  const s3 = await stats();
  const third = await attempt(sdk, d);
  const s4 = await stats();
  const log = g.log;
  check(`${sdk} SDK, default retries: refused by the proxy once, then served ` +
    `(${log.map((x) => x.status).join(', ')})`,
    third.text === 'tok0tok1' && log.length === 2 && log[0].status === 429 &&
      log[0]['x-should-retry'] === 'true' && log[1].status === 200,
    { text: third.text, error: String(third.error), log });
  check(`${sdk} SDK, default retries: one upstream request, no 429 upstream`,
    s4.received - s3.received === 1 && s4.rate_limited === s3.rate_limited, { s3, s4 });
  if (log.length === 2) {
    const ms = Number(log[0]['retry-after-ms']);
    const waited = log[1].sentAt - log[0].at;
    check(`${sdk} SDK: waited the retry-after-ms it was given (${ms} ms; waited ` +
      `${waited.toFixed(1)} ms), Retry-After ${log[0]['retry-after']} s`,
      ms > 1000 && ms <= WINDOW_MS + 1000 && waited >= ms - EARLY_MS && waited <= ms + SLACK_MS &&
        Number(log[0]['retry-after']) === Math.ceil(ms / 1000),
      log[0]);
  }
}

// A case that throws where no check expected it fails, and the rest run.
async function run(what, fn) {
  try {
    await fn();
  } catch (e) {
    check(what, false, `${e?.constructor?.name}: ${String(e?.message ?? e).slice(0, 200)}`);
  }
}

await run('openai SDK', () => refusedLocally('openai'));
await run('anthropic SDK', () => refusedLocally('anthropic'));
process.exit(exitCode());
