// The official SDKs (openai, @anthropic-ai/sdk; pinned in package.json)
// pointed at sg-proxy, with sg-fakemodel as the upstream: each scenario is
// set with the X-SG-Scenario request header (the SDKs' defaultHeaders),
// which the proxy forwards.  The SDKs' own retries are off (maxRetries 0),
// so whatever is retried is retried by the proxy.  Each request carries its
// own Idempotency-Key, which makes the proxy's retries safe and lets the
// check read what sg-fakemodel received for it (/_log?key=...).
//
// Prints one "ok: ..." or "FAIL: ..." line per check; exits 1 if any failed.
// Time is measured with performance.now() (monotonic) and held to bounds.
//
// Usage: node proxy_check.mjs OPENAI_PROXY_URL ANTHROPIC_PROXY_URL FAKEMODEL_URL IDLE_MS
//          OPENAI_NOFIRST_URL ANTHROPIC_NOFIRST_URL OPENAI_USAGE_URL
//   (the first two proxies started with --idle IDLE_MS --first-item IDLE_MS and
//   --attempts 3; the next two with --attempts 3 --idempotent and no first-item
//   clock; the last with --include-usage)
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { check, exitCode } from './checklines.mjs';

const [openaiProxy, anthropicProxy, fakemodel, idleArg, openaiNoFirst, anthropicNoFirst, openaiUsage] =
  process.argv.slice(2);
const idleMs = Number(idleArg);
// how late past the idle clock an SDK may see the error: the proxy's
// timer, two loopback hops and the SDK's parsing
const SLACK_MS = 150;

let keySeq = 0;
const newKey = (tag) => `px-sdk-${tag}-${process.pid}-${(keySeq += 1)}`;

// What sg-fakemodel received with this Idempotency-Key.
async function received(key) {
  const r = await fetch(`${fakemodel}/_log?key=${encodeURIComponent(key)}&event=received`);
  const log = await r.json();
  return log.events;
}

const openaiClient = (headers) =>
  new OpenAI({ baseURL: `${openaiProxy}/v1`, apiKey: 'sk-proxy-SDKSECRET-1', maxRetries: 0, defaultHeaders: headers });

const anthropicClient = (headers) =>
  new Anthropic({ baseURL: anthropicProxy, apiKey: 'sk-ant-SDKSECRET-2', maxRetries: 0, defaultHeaders: headers });

// Reads a stream to its end or its error: the text, each token's arrival,
// the error and when it was raised, all in ms from the request's start.
async function drain(start, textOf) {
  const t0 = performance.now();
  const acc = { text: '', tokenAt: [], error: null, errorAt: null, ms: null };
  try {
    const stream = await start();
    for await (const ev of stream) {
      const t = textOf(ev);
      if (t.length > 0) {
        acc.tokenAt.push(performance.now() - t0);
        acc.text += t;
      }
    }
  } catch (e) {
    acc.error = e;
    acc.errorAt = performance.now() - t0;
  }
  acc.ms = performance.now() - t0;
  return acc;
}

const openaiText = (chunk) => chunk.choices?.[0]?.delta?.content ?? '';
const anthropicText = (ev) =>
  ev.type === 'content_block_delta' && ev.delta?.type === 'text_delta' ? ev.delta.text : '';

const sdks = {
  openai: (scenario, key, extra = {}) =>
    drain(
      () =>
        openaiClient({ 'X-SG-Scenario': scenario, 'Idempotency-Key': key, ...extra }).chat.completions.create({
          model: 'sg-fakemodel',
          messages: [{ role: 'user', content: 'hi' }],
          stream: true,
        }),
      openaiText,
    ),
  anthropic: (scenario, key, extra = {}) =>
    drain(
      () =>
        anthropicClient({ 'X-SG-Scenario': scenario, 'Idempotency-Key': key, ...extra }).messages.create({
          model: 'sg-fakemodel',
          max_tokens: 64,
          messages: [{ role: 'user', content: 'hi' }],
          stream: true,
        }),
      anthropicText,
    ),
};

// The outcome name an SDK error carries: openai's APIError has the
// in-band/body error object as err.error ({type, code, message}) and its
// type as err.type; Anthropic's has the whole body ({type:"error",
// error:{type}}) as err.error.
function errorType(e) {
  return e?.error?.error?.type ?? e?.error?.type ?? e?.type ?? null;
}

const tokens = (n) => Array.from({ length: n }, (_, i) => `tok${i}`).join('');
const show = (r) =>
  JSON.stringify({
    text: r.text,
    error: r.error ? `${r.error.constructor?.name}: ${String(r.error.message).slice(0, 160)}` : null,
    type: r.error ? errorType(r.error) : null,
    status: r.error?.status,
    ms: Math.round(r.ms),
  });

for (const [name, run] of Object.entries(sdks)) {
  // a normal stream
  let key = newKey(`${name}-normal`);
  let r = await run('n=5&gap=10', key);
  check(`${name}: a normal stream completes with the right text`, r.error === null && r.text === tokens(5), show(r));
  let seen = await received(key);
  check(`${name}: ... through the proxy to the upstream's path`,
    seen.length === 1 && seen[0].path === (name === 'openai' ? '/v1/chat/completions' : '/v1/messages'),
    JSON.stringify(seen));

  // a slow first token on the first attempt only: retried, invisibly
  key = newKey(`${name}-tail`);
  r = await run('n=5&gap=5&tail_first=1&tail_delay=3000', key);
  seen = await received(key);
  check(`${name}: a slow first token is retried invisibly: one clean stream (${Math.round(r.ms)} ms)`,
    r.error === null && r.text === tokens(5), show(r));
  check(`${name}: ... after two upstream attempts, well before the slow one's 3 s`,
    seen.length === 2 && r.ms < 3000 - 500, `${seen.length} attempts, ${Math.round(r.ms)} ms`);

  // a mid-stream stall
  key = newKey(`${name}-stall`);
  r = await run('n=9&gap=10&stall_after=3&stall=forever', key);
  const last = r.tokenAt.at(-1);
  const late = r.errorAt - last;
  check(`${name}: a mid-stream stall is an SDK error naming idle_timeout after the 3 tokens`,
    r.error !== null && r.text === tokens(3) && errorType(r.error) === 'idle_timeout', show(r));
  check(`${name}: ... raised ${Math.round(late)} ms after the last token (idle ${idleMs} ms; bound <= ${idleMs + SLACK_MS})`,
    r.error !== null && late <= idleMs + SLACK_MS, show(r));
  check(`${name}: ... and not before the idle clock ran out: the tokens arrived as they were sent (bound >= ${idleMs - 50})`,
    r.error !== null && late >= idleMs - 50, `the error came ${late.toFixed(1)} ms after the last token; tokens at ${r.tokenAt.map((t) => t.toFixed(1))}`);

  // a mid-stream cut: an error, not a silently shorter answer
  key = newKey(`${name}-drop`);
  r = await run('n=9&gap=10&drop_after=3', key);
  check(`${name}: a mid-stream cut is an SDK error, not a shorter answer`,
    r.error !== null && r.text === tokens(3) && ['truncated', 'transport_error'].includes(errorType(r.error)), show(r));
  key = newKey(`${name}-cut`);
  r = await run('n=9&gap=10&cut_at=3&cut=drop', key);
  // The proxy ends the half event with a blank line before its own error
  // event, so an SDK may raise on the half event's JSON first: any SDK
  // error counts, a clean end with the 3 tokens does not.
  check(`${name}: a cut in the middle of an event is an SDK error too (${errorType(r.error) ?? r.error?.constructor?.name})`,
    r.error !== null && r.text === tokens(3), show(r));

  // 429 then success
  key = newKey(`${name}-429`);
  r = await run('n=4&gap=5&status=429&fail_first=1', key);
  seen = await received(key);
  check(`${name}: a 429 then success is invisible`, r.error === null && r.text === tokens(4), show(r));
  check(`${name}: ... the upstream answered 429 once, then streamed (2 requests)`, seen.length === 2, JSON.stringify(seen));

  // a slow first token every time: a 504 before commit
  key = newKey(`${name}-slow`);
  r = await run('n=2&first_delay=3000', key);
  check(`${name}: a slow first token on every attempt is an SDK error with status 504, first_item_timeout`,
    r.error !== null && r.error.status === 504 && errorType(r.error) === 'first_item_timeout' && r.text === '', show(r));

  // an inbound X-Deadline-Ms shrinks the upstream's
  key = newKey(`${name}-deadline`);
  r = await run('n=2&gap=5', key, { 'X-Deadline-Ms': '1500' });
  seen = await received(key);
  const xd = Number(seen[0]?.x_deadline_ms);
  check(`${name}: X-Deadline-Ms 1500 shrinks the upstream's (it saw ${seen[0]?.x_deadline_ms})`,
    r.error === null && seen.length === 1 && xd > 0 && xd <= 1500, `${show(r)} ${JSON.stringify(seen)}`);
}

// An unsafe POST that timed out after it was sent may have taken effect:
// the proxy never repeats it, and tells the SDK not to either - an SDK
// left to its own retries (maxRetries 2) must not send it again.
{
  const tag = `px-sdk-unknown-${process.pid}`;
  const client = new OpenAI({
    baseURL: `${openaiProxy}/v1`,
    apiKey: 'sk-proxy-SDKSECRET-1',
    maxRetries: 2,
    defaultHeaders: { 'X-SG-Scenario': 'n=2&first_delay=3000' },
  });
  let err = null;
  try {
    const stream = await client.chat.completions.create(
      { model: 'sg-fakemodel', messages: [{ role: 'user', content: 'hi' }], stream: true },
      { query: { _t: tag } },
    );
    for await (const _ of stream) {
      // nothing comes
    }
  } catch (e) {
    err = e;
  }
  const log = await (await fetch(`${fakemodel}/_log?event=received`)).json();
  const sent = log.events.filter((e) => (e.query ?? '').includes(tag)).length;
  check(`openai with its own retries: an outcome-unknown 504 is sent once, not repeated by the SDK (${sent} upstream request(s))`,
    err !== null && err.status === 504 && sent === 1, `${err?.status} ${sent}`);
}

// The upstream refused the request as the client's error: the SDK gets
// that status and raises its own error for it (not a 502, which it would
// retry), and the request went upstream once.
{
  const tag = `px-sdk-400-${process.pid}`;
  const client = new OpenAI({
    baseURL: `${openaiProxy}/v1`,
    apiKey: 'sk-proxy-SDKSECRET-1',
    maxRetries: 2,
    defaultHeaders: { 'X-SG-Scenario': 'status=400' },
  });
  let err = null;
  try {
    await client.chat.completions.create(
      { model: 'sg-fakemodel', messages: [{ role: 'user', content: 'hi' }], stream: true },
      { query: { _t: tag } },
    );
  } catch (e) {
    err = e;
  }
  const log = await (await fetch(`${fakemodel}/_log?event=received`)).json();
  const sent = log.events.filter((e) => (e.query ?? '').includes(tag)).length;
  check(`openai with its own retries: an upstream 400 is the SDK's BadRequestError, sent once (${sent} upstream request(s))`,
    err instanceof OpenAI.BadRequestError && err.status === 400 && sent === 1,
    `${err?.constructor?.name} ${err?.status} ${sent}`);
  check('openai: the upstream 400\'s own message reaches the SDK\'s error',
    (err?.message ?? '').includes('sg-fakemodel scripted status 400'), err?.message);
}

// The same through the anthropic route: a 401 upstream is the SDK's
// AuthenticationError, not an InternalServerError it would retry.
{
  const tag = `px-sdk-401-${process.pid}`;
  const client = new Anthropic({
    baseURL: anthropicProxy,
    apiKey: 'sk-ant-SDKSECRET-2',
    maxRetries: 2,
    defaultHeaders: { 'X-SG-Scenario': `status=401&_t=${tag}` },
  });
  let err = null;
  try {
    await client.messages.create({
      model: 'sg-fakemodel', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }], stream: true,
    });
  } catch (e) {
    err = e;
  }
  const log = await (await fetch(`${fakemodel}/_log?event=received`)).json();
  const sent = log.events.filter((e) => (e.query ?? '').includes(tag) || JSON.stringify(e).includes(tag)).length;
  check(`anthropic with its own retries: an upstream 401 is the SDK's AuthenticationError, sent once (${sent} upstream request(s))`,
    err instanceof Anthropic.AuthenticationError && err.status === 401 && sent === 1,
    `${err?.constructor?.name} ${err?.status} ${sent}`);
}

// A body over --max-body (8 MiB here) is refused 413 from its head, while
// the SDK is still sending it: the proxy half-closes and reads on, so the
// SDK reads the 413 (an APIError it does not retry) rather than a reset
// (an APIConnectionError it would retry, re-sending 9 MB each time).
{
  const client = new OpenAI({ baseURL: `${openaiProxy}/v1`, apiKey: 'sk-proxy-SDKSECRET-1', maxRetries: 0 });
  const huge = 'x'.repeat(9 * 1024 * 1024);
  const got = [];
  for (let i = 0; i < 5; i++) {
    try {
      await client.chat.completions.create({
        model: 'sg-fakemodel', messages: [{ role: 'user', content: huge }], stream: true,
      });
      got.push('no error');
    } catch (e) {
      got.push(e instanceof OpenAI.APIConnectionError ? `connection: ${e.cause?.code ?? e.message}` : e.status);
    }
  }
  check('openai: a 9 MB body over --max-body is the SDK\'s 413, five times in five (no reset)',
    got.every((g) => g === 413), got.join(', '));
}

// Retries never multiply across layers: each SDK left to its own retries
// (2 by default) sends one request through the proxy, which already
// retries it (--attempts 3): the proxy's answer says x-should-retry:
// false, so the upstream sees no more requests than the route's attempts
// and the SDK raises within its time.  And the SDK's timeout, sent as
// X-Stainless-Timeout, bounds the proxy's budget: its 504 comes before
// the SDK would give up on its own (and retry).
const ROUTE_ATTEMPTS = 3;
// (the request's own options: openai 7.59 sends X-Stainless-Timeout only
// for a timeout given per request; @anthropic-ai/sdk for either)
const layered = {
  openai: (base, headers, opts) =>
    new OpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-proxy-SDKSECRET-1', defaultHeaders: headers })
      .chat.completions.create(
        { model: 'sg-fakemodel', messages: [{ role: 'user', content: 'hi' }], stream: true },
        opts,
      ),
  anthropic: (base, headers, opts) =>
    new Anthropic({ baseURL: base, apiKey: 'sk-ant-SDKSECRET-2', defaultHeaders: headers }).messages.create(
      { model: 'sg-fakemodel', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }], stream: true },
      opts,
    ),
};

// One request by @sdk at its default retries (@headers and @opts its
// own), for @scenario: the upstream requests it caused, its error, and
// when it came.
async function layeredRun(sdk, base, headers, opts, scenario) {
  const tag = `px-sdk-layers-${sdk}-${process.pid}-${(keySeq += 1)}`;
  const t0 = performance.now();
  let err = null;
  try {
    const stream = await layered[sdk](base, { 'X-SG-Scenario': scenario, ...headers },
      { query: { _t: tag }, ...opts });
    for await (const _ of stream) {
      // nothing comes
    }
  } catch (e) {
    err = e;
  }
  const ms = performance.now() - t0;
  const log = await (await fetch(`${fakemodel}/_log?event=received`)).json();
  const sent = log.events.filter((e) => (e.query ?? '').includes(tag)).length;
  return { err, ms, sent, show: `${sent} upstream request(s), ${err?.constructor?.name} ${err?.status} after ${Math.round(ms)} ms` };
}

for (const [sdk, proxy, noFirst] of [
  ['openai', openaiProxy, openaiNoFirst],
  ['anthropic', anthropicProxy, anthropicNoFirst],
]) {
  // no first token within the route's clock, on any attempt: the route's
  // 3 attempts, one 504, no SDK retry on top (each would be 3 more)
  let r = await layeredRun(sdk, proxy, { 'Idempotency-Key': newKey(`${sdk}-layers`) }, {},
    'first_delay=30000');
  check(`${sdk} with its default retries, no first token: upstream requests <= the route's ${ROUTE_ATTEMPTS} (${r.show})`,
    r.err !== null && r.err.status === 504 && r.sent <= ROUTE_ATTEMPTS, r.show);
  check(`${sdk} with its default retries, no first token: the SDK's error within 3 x ${idleMs} ms and the backoff (bound 2000 ms)`,
    r.err !== null && r.ms < 2000, r.show);
  // no first-token clock, the SDK's timeout 2.5 s (X-Stainless-Timeout: 2):
  // the proxy's budget is the client's, its 504 comes first
  r = await layeredRun(sdk, noFirst, {}, { timeout: 2500 }, 'first_delay=30000');
  check(`${sdk} with its default retries and timeout 2.5 s: upstream requests <= the route's ${ROUTE_ATTEMPTS} (${r.show})`,
    r.err !== null && r.sent <= ROUTE_ATTEMPTS, r.show);
  check(`${sdk} with its default retries and timeout 2.5 s: the SDK's error within it, the proxy's 504 (X-Stainless-Timeout read)`,
    r.err !== null && r.err.status === 504 && r.ms < 2500, r.show);
}

// --include-usage: the SDK asks for no usage (it never adds stream_options
// itself), the proxy adds the option, and the SDK then gets one more chunk
// before [DONE] - choices [], the usage - beside "usage": null on every
// other.  Read as the SDK reads it: the raw stream yields it (code that
// takes choices[0] must allow for the empty array), and the helper's
// final completion carries the figures.  Without the option, no usage.
{
  const scenario = 'n=5&role_chunk=1&prompt_tokens=42&cached_tokens=2&reasoning_tokens=3';
  const want = { prompt_tokens: 42, completion_tokens: 8, total_tokens: 50 };
  const sameUsage = (u) =>
    u != null && u.prompt_tokens === 42 && u.completion_tokens === 8 && u.total_tokens === 50 &&
    u.prompt_tokens_details?.cached_tokens === 2 && u.completion_tokens_details?.reasoning_tokens === 3;
  const client = (base) =>
    new OpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-proxy-SDKSECRET-1', maxRetries: 0,
      defaultHeaders: { 'X-SG-Scenario': scenario } });
  const body = { model: 'sg-fakemodel', messages: [{ role: 'user', content: 'hi' }], stream: true };
  const chunks = [];
  let err = null;
  try {
    for await (const c of await client(openaiUsage).chat.completions.create(body)) {
      chunks.push(c);
    }
  } catch (e) {
    err = e;
  }
  const text = chunks.map(openaiText).join('');
  const last = chunks.at(-1);
  check('openai through --include-usage: the raw stream ends whole, its text intact',
    err === null && text === tokens(5), `${err} ${text}`);
  check('... its last chunk the usage: choices [], the upstream\'s figures',
    last !== undefined && Array.isArray(last.choices) && last.choices.length === 0 && sameUsage(last.usage),
    JSON.stringify(last));
  check('... and every chunk before it "usage": null',
    chunks.length > 1 && chunks.slice(0, -1).every((c) => c.usage === null),
    JSON.stringify(chunks.slice(0, -1).map((c) => c.usage)));
  let final = null;
  err = null;
  try {
    const s = client(openaiUsage).chat.completions.stream(body);
    final = await s.finalChatCompletion();
  } catch (e) {
    err = e;
  }
  check('openai\'s stream() helper through --include-usage: finalChatCompletion().usage is the upstream\'s',
    err === null && final?.choices?.[0]?.message?.content === tokens(5) && sameUsage(final?.usage),
    `${err} ${JSON.stringify(final?.usage ?? null)} ${JSON.stringify(want)}`);
  final = null;
  err = null;
  try {
    final = await client(openaiProxy).chat.completions.stream(body).finalChatCompletion();
  } catch (e) {
    err = e;
  }
  check('... and through a route without it, no usage (the option made the difference)',
    err === null && final?.choices?.[0]?.message?.content === tokens(5) && final?.usage == null,
    `${err} ${JSON.stringify(final?.usage ?? null)}`);
}

process.exit(exitCode());
