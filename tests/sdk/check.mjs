// Runs the providers' official SDKs (pinned in package.json) against
// sg-fakemodel and prints, for each scenario, what the SDK made of the
// stream: the text it produced, and the error it raised (class, type,
// message) - one JSON line per case.  The shell test compares them with
// what sg-fakemodel was scripted to send.  With SG_STREAM, it also runs
// `sg-stream --profile` on the same stream and prints a second line per
// case saying whether the two agree: on the text, on whether the stream
// ended in error, on the error's type when the SDK names one, and (for a
// case with a first_delay) on the first token coming after that delay.
// Where they disagree in a known way (an SDK silent on a stream cut
// before its clean end, or on an error event it yields as an ordinary one;
// a profile that does not see an error the SDK raises), the line says
// which, in `known`; it still says agree: false.
//
// Usage: node check.mjs BASE_URL [SG_STREAM]
import { spawnSync } from 'node:child_process';
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import { Ollama } from 'ollama';
import OpenAI from 'openai';

const base = process.argv[2];
const sgStream = process.argv[3];

// What sg-stream --profile makes of the same stream: the text of its items
// (read the way each provider's text is carried), its outcome, the time to
// its first token, and the in-band error's type.
const geminiText = (chunk) =>
  chunk.candidates?.[0]?.content?.parts?.map((p) => p.text ?? '').join('') ?? '';
const sgText = {
  openai: (ev) => JSON.parse(ev.data).choices?.[0]?.delta?.content ?? '',
  'openai-responses': (ev) =>
    ev.event === 'response.output_text.delta' ? JSON.parse(ev.data).delta ?? '' : '',
  anthropic: (ev) =>
    ev.event === 'content_block_delta' ? JSON.parse(ev.data).delta?.text ?? '' : '',
  gemini: (ev) => geminiText(JSON.parse(ev.data)),
  ollama: (ev) => JSON.parse(ev.data).message?.content ?? '',
};
const sgPath = {
  openai: '/v1/chat/completions',
  'openai-responses': '/v1/responses',
  anthropic: '/v1/messages',
  // the path @google/genai asks for (sg-fakemodel logs it)
  gemini: '/v1beta/models/sg-fakemodel:streamGenerateContent?alt=sse',
  ollama: '/api/chat',
};

function sgRun(profile, scenario) {
  const r = spawnSync(sgStream, ['--profile', profile, '--output', 'jsonl', '--budget', '10s',
    '-H', `X-SG-Scenario: ${scenario}`,
    '-w', '\n%{outcome} %{first_token_ms} %{http_status} %{provider_error}\n',
    '-q', `${base}${sgPath[profile]}`], { encoding: 'utf8' });
  const lines = r.stdout.split('\n').filter((l) => l.length > 0);
  const [outcome, ttft, http, type] = lines.pop().split(' ');
  const text = lines.map((l) => sgText[profile](JSON.parse(l))).join('');
  return { text, outcome, type: type ?? '', first_token_ms: Number(ttft), http_status: Number(http) };
}

// The ways an SDK and a profile are known to disagree, only when the text
// is the same: the SDK reports nothing where the profile sees a cut stream
// or an error event (by the SDK's design), or the SDK names an error that
// the profile does not see, and calls the stream truncated (a gap in the
// profile).  Anything else is a plain disagreement.
function knownDisagreement(sdk, sg) {
  if (sg.text !== sdk.text) {
    return null;
  }
  if (sdk.error === null && sg.outcome === 'truncated') {
    return 'sdk_silent_on_truncation';
  }
  if (sdk.error === null && sg.outcome === 'provider_error') {
    return 'sdk_silent_on_in_band_error';
  }
  if (sdk.error !== null && sdk.error.type !== null && sg.outcome === 'truncated') {
    return 'profile_misses_in_band_error';
  }
  return null;
}

function agree(name, profile, scenario, sdk) {
  if (!sgStream) {
    return;
  }
  const sg = sgRun(profile, scenario);
  const sdkError = sdk.error !== null;
  const sgError = sg.outcome !== 'ok';
  let ok = sg.text === sdk.text && sdkError === sgError &&
    (!sdkError || sdk.error.type === null || sdk.error.type === sg.type);
  const status = Number(new URLSearchParams(scenario).get('status') ?? 0);
  if (status > 0) {
    // an error status: both say it is that status (sg-stream: http_error)
    ok = sg.text === sdk.text && sdkError && sdk.status === status &&
      sg.outcome === 'http_error' && sg.http_status === status;
  }
  if (!sdkError && sdk.text === '') {
    // an empty answer: no first token, on either side (sg-stream's -w
    // prints '-' for the report's null)
    ok = ok && sdk.firstTokenMs === null && Number.isNaN(sg.first_token_ms);
  }
  const delay = Number(new URLSearchParams(scenario).get('first_delay') ?? 0);
  if (delay > 0) {
    // both must see the first token after the delay: metadata before it
    // is not the first token
    ok = ok && sdk.firstTokenMs >= delay && sg.first_token_ms >= delay;
  }
  const known = ok ? null : knownDisagreement(sdk, sg);
  console.log(JSON.stringify({
    case: name,
    agree: ok,
    ...(known ? { known } : {}),
    sdk: { text: sdk.text, error: sdk.error?.type ?? sdkError, first_token_ms: sdk.firstTokenMs },
    sg,
  }));
}

// The type each SDK gives an in-band error.  openai's APIError carries
// the Responses API's `code` as err.code (err.type is the literal
// "error"); @google/genai's ApiError has only the HTTP-style number and
// names the status in its message ("got status: UNAVAILABLE. {...}").
function sdkErrorType(e, profile) {
  if (profile === 'openai-responses') {
    return e?.code ?? null;
  }
  if (profile === 'gemini') {
    return /^got status: ([A-Z_]+)\./.exec(String(e?.message))?.[1] ?? null;
  }
  return e?.error?.error?.type ?? e?.error?.type ?? e?.type ?? null;
}

// Collects the text an SDK's stream yields, and when the first of it came.
async function collect(stream, textOf) {
  const t0 = stream.t0;
  const acc = { text: '', firstTokenMs: null };
  try {
    for await (const ev of stream) {
      const t = textOf(ev);
      if (t.length > 0 && acc.firstTokenMs === null) {
        acc.firstTokenMs = Date.now() - t0;
      }
      acc.text += t;
    }
  } catch (e) {
    e.partial = acc;
    throw e;
  }
  return acc;
}

async function run(name, scenario, fn) {
  const out = { case: name, text: '', error: null };
  let firstTokenMs = null;
  let status = null;
  try {
    const acc = await fn(scenario, Date.now());
    out.text = acc.text;
    firstTokenMs = acc.firstTokenMs;
    // a usage case: what the SDK reports of the usage, after the rest
    Object.assign(out, acc.report ?? {});
  } catch (e) {
    out.error = {
      class: e?.constructor?.name ?? typeof e,
      type: sdkErrorType(e, fn.profile),
      message: String(e?.message ?? e).slice(0, 200),
    };
    out.text = e.partial?.text ?? out.text;
    firstTokenMs = e.partial?.firstTokenMs ?? null;
    status = e?.status ?? e?.status_code ?? null;
  }
  console.log(JSON.stringify(out));
  agree(name, fn.profile, scenario, { ...out, firstTokenMs, status });
}

// Each SDK's client (or stream) for a scenario, which rides in X-SG-Scenario.
const openaiClient = (scenario) => new OpenAI({
  baseURL: `${base}/v1`,
  apiKey: 'sk-test',
  maxRetries: 0,
  defaultHeaders: { 'X-SG-Scenario': scenario },
});
const anthropicClient = (scenario) => new Anthropic({
  baseURL: base,
  apiKey: 'sk-ant-test',
  maxRetries: 0,
  defaultHeaders: { 'X-SG-Scenario': scenario },
});
const geminiStream = (scenario) => new GoogleGenAI({
  apiKey: 'x',
  httpOptions: { baseUrl: base, headers: { 'X-SG-Scenario': scenario } },
}).models.generateContentStream({ model: 'sg-fakemodel', contents: 'hi' });
const ollamaStream = (scenario) =>
  new Ollama({ host: base, headers: { 'X-SG-Scenario': scenario } }).chat({
    model: 'sg-fakemodel',
    messages: [{ role: 'user', content: 'hi' }],
    stream: true,
  });

async function openaiText(scenario, t0) {
  const client = openaiClient(scenario);
  const stream = await client.chat.completions.create({
    model: 'sg-fakemodel',
    messages: [{ role: 'user', content: 'hi' }],
    stream: true,
  });
  stream.t0 = t0;
  return collect(stream, (chunk) => chunk.choices?.[0]?.delta?.content ?? '');
}

// The Responses API through the raw stream of responses.create(): every
// event is yielded; the text is in response.output_text.delta.
async function responsesText(scenario, t0) {
  const client = openaiClient(scenario);
  const stream = await client.responses.create({
    model: 'sg-fakemodel',
    input: 'hi',
    stream: true,
  });
  stream.t0 = t0;
  return collect(stream, (ev) => (ev.type === 'response.output_text.delta' ? ev.delta : ''));
}

async function anthropicText(scenario, t0) {
  const client = anthropicClient(scenario);
  const stream = await client.messages.create({
    model: 'sg-fakemodel',
    max_tokens: 64,
    messages: [{ role: 'user', content: 'hi' }],
    stream: true,
  });
  stream.t0 = t0;
  return collect(stream, (ev) =>
    ev.type === 'content_block_delta' && ev.delta?.type === 'text_delta' ? ev.delta.text : '');
}

// Gemini: POST {baseUrl}/v1beta/models/sg-fakemodel:streamGenerateContent?alt=sse
async function geminiTextOf(scenario, t0) {
  const stream = await geminiStream(scenario);
  stream.t0 = t0;
  return collect(stream, geminiText);
}

async function ollamaText(scenario, t0) {
  const stream = await ollamaStream(scenario);
  stream.t0 = t0;
  return collect(stream, (part) => part.message?.content ?? '');
}

// Usage, as each SDK reports it (docs/sg-fakemodel.md, Usage).  Each
// returns what collect() does, with `report`: the SDK's usage object(s)
// exactly as the SDK gives them, so a figure that is missing, misplaced or
// differently shaped shows in the line.

// openai: the helper (chat.completions.stream), which wants the role
// chunk OpenAI always sends first (role_chunk=1) and a finish_reason, and
// merges the usage chunk into finalChatCompletion() only when the chunk
// has the stream's id; or (@raw) the raw stream of create(), whose last
// chunk with a usage is the one to read.  With @ask false the request does
// not ask for usage.  usage_nulls: chunks carrying "usage": null;
// usage_chunk_choices: the usage chunk's choices.
function openaiUsage(ask, raw) {
  const f = async (scenario, t0) => {
    const client = openaiClient(scenario);
    const body = {
      model: 'sg-fakemodel',
      messages: [{ role: 'user', content: 'hi' }],
      ...(ask ? { stream_options: { include_usage: true } } : {}),
    };
    const stream = raw
      ? await client.chat.completions.create({ ...body, stream: true })
      : client.chat.completions.stream(body);
    stream.t0 = t0;
    let nulls = 0;
    let usage = null;
    let usageChoices = null;
    const acc = await collect(stream, (chunk) => {
      if (Object.hasOwn(chunk, 'usage') && chunk.usage === null) {
        nulls++;
      } else if (chunk.usage) {
        usage = chunk.usage;
        usageChoices = chunk.choices;
      }
      return chunk.choices?.[0]?.delta?.content ?? '';
    });
    if (!raw) {
      usage = (await stream.finalChatCompletion()).usage ?? null;
    }
    acc.report = { usage, usage_nulls: nulls, usage_chunk_choices: usageChoices };
    return acc;
  };
  f.profile = 'openai';
  return f;
}

// The Responses API through its helper (responses.stream): the usage of
// finalResponse(), which is response.completed's; and response.created's.
async function responsesUsage(scenario, t0) {
  const stream = openaiClient(scenario).responses.stream({ model: 'sg-fakemodel', input: 'hi' });
  stream.t0 = t0;
  let created;
  const acc = await collect(stream, (ev) => {
    if (ev.type === 'response.created') {
      created = ev.response.usage;
    }
    return ev.type === 'response.output_text.delta' ? ev.delta : '';
  });
  const final = await stream.finalResponse();
  acc.report = { usage: final.usage ?? null, created_usage: created === undefined ? 'absent' : created };
  return acc;
}

// MessageStream: message_start's usage (copied as it came: the SDK then
// overwrites the same object) and finalMessage().usage, which the SDK
// makes from message_start and the cumulative message_delta.
async function anthropicUsage(scenario, t0) {
  const stream = anthropicClient(scenario).messages.stream({
    model: 'sg-fakemodel',
    max_tokens: 64,
    messages: [{ role: 'user', content: 'hi' }],
  });
  stream.t0 = t0;
  let start = null;
  const acc = await collect(stream, (ev) => {
    if (ev.type === 'message_start') {
      start = JSON.parse(JSON.stringify(ev.message.usage));
    }
    return ev.type === 'content_block_delta' && ev.delta?.type === 'text_delta' ? ev.delta.text : '';
  });
  const final = await stream.finalMessage();
  acc.report = { start_usage: start, usage: final.usage };
  return acc;
}

// @google/genai: the usageMetadata of the last chunk that has one, and
// each chunk's candidatesTokenCount (running totals, never summed).
async function geminiUsage(scenario, t0) {
  const stream = await geminiStream(scenario);
  stream.t0 = t0;
  let last = null;
  const running = [];
  const acc = await collect(stream, (chunk) => {
    last = chunk.usageMetadata ?? last;
    running.push(chunk.usageMetadata?.candidatesTokenCount ?? null);
    return geminiText(chunk);
  });
  acc.report = { usage: last, running };
  return acc;
}

// ollama: the counts of the done part (a field Ollama omits stays absent).
async function ollamaUsage(scenario, t0) {
  const stream = await ollamaStream(scenario);
  stream.t0 = t0;
  let done = null;
  const acc = await collect(stream, (part) => {
    if (part.done) {
      done = { prompt_eval_count: part.prompt_eval_count, eval_count: part.eval_count };
    }
    return part.message?.content ?? '';
  });
  acc.report = { usage: done };
  return acc;
}

openaiText.profile = 'openai';
responsesText.profile = 'openai-responses';
anthropicText.profile = 'anthropic';
geminiTextOf.profile = 'gemini';
ollamaText.profile = 'ollama';
responsesUsage.profile = 'openai-responses';
anthropicUsage.profile = 'anthropic';
geminiUsage.profile = 'gemini';
ollamaUsage.profile = 'ollama';

await run('openai normal', 'n=3&gap=0', openaiText);
await run('openai role chunk', 'n=3&gap=0&role_chunk=1', openaiText);
await run('openai error after 2', 'n=5&gap=0&error_at=2', openaiText);
await run('openai error then [DONE]', 'n=5&gap=0&error_at=1&error_then_done=1&error_type=rate_limit_error', openaiText);
await run('openai no [DONE]', 'n=3&gap=0&no_done=1', openaiText);
await run('responses normal', 'n=3&gap=0', responsesText);
await run('responses slow first token after metadata', 'n=2&gap=0&first_delay=150', responsesText);
await run('responses error before the first token', 'n=3&gap=0&error_at=0', responsesText);
await run('responses error after 2', 'n=5&gap=0&error_at=2&error_type=rate_limit_exceeded', responsesText);
await run('responses response.failed after 1', 'n=3&gap=0&error_at=1&error_event=response.failed', responsesText);
await run('responses no response.completed', 'n=3&gap=0&no_done=1', responsesText);
await run('anthropic normal', 'n=3&gap=0', anthropicText);
await run('anthropic ping keepalive', 'n=2&gap=120&keepalive=40', anthropicText);
await run('anthropic error after 1', 'n=5&gap=0&error_at=1', anthropicText);
await run('anthropic no message_stop', 'n=3&gap=0&no_done=1', anthropicText);
await run('gemini normal', 'n=3&gap=0', geminiTextOf);
await run('gemini slow first token', 'n=2&gap=0&first_delay=150', geminiTextOf);
await run('gemini keepalive comments', 'n=2&gap=120&keepalive=40', geminiTextOf);
await run('gemini error before the first token', 'n=3&gap=0&error_at=0', geminiTextOf);
await run('gemini error after 2', 'n=5&gap=0&error_at=2&error_type=RESOURCE_EXHAUSTED', geminiTextOf);
await run('gemini bare error before the first token', 'n=3&gap=0&error_at=0&error_event=bare', geminiTextOf);
await run('gemini bare error after 1', 'n=3&gap=30&error_at=1&error_event=bare', geminiTextOf);
await run('gemini no finishReason', 'n=3&gap=0&no_done=1', geminiTextOf);
await run('ollama normal', 'n=3&gap=0&format=ollama', ollamaText);
await run('ollama error after 2', 'n=5&gap=0&error_at=2&format=ollama', ollamaText);
await run('ollama no done line', 'n=3&gap=0&format=ollama&no_done=1', ollamaText);
// an empty answer: the prelude and the clean end, no content - ok, and no
// time to first token
await run('openai empty answer', 'n=0&role_chunk=1', openaiText);
await run('responses empty answer', 'n=0', responsesText);
await run('anthropic empty answer', 'n=0', anthropicText);
await run('gemini empty answer', 'n=0', geminiTextOf);
await run('ollama empty answer', 'n=0&format=ollama', ollamaText);
// an error status with the provider's own error body: each SDK raises its
// error for that status, with the body's message
await run('openai status 401', 'status=401', openaiText);
await run('responses status 400', 'status=400', responsesText);
await run('anthropic status 401', 'status=401', anthropicText);
await run('gemini status 403', 'status=403', geminiTextOf);
await run('ollama status 404', 'status=404&format=ollama', ollamaText);
// usage: 3 tokens streamed, 11 prompt tokens of which 4 cached, 2 hidden
// reasoning tokens - each SDK must read exactly these figures
const USAGE = 'n=3&gap=0&prompt_tokens=11&cached_tokens=4&reasoning_tokens=2';
await run('openai usage', `${USAGE}&role_chunk=1`, openaiUsage(true, false));
await run('openai usage, raw stream', USAGE, openaiUsage(true, true));
await run('openai usage not asked for', `${USAGE}&role_chunk=1`, openaiUsage(false, false));
await run('responses usage', USAGE, responsesUsage);
await run('anthropic usage', USAGE, anthropicUsage);
await run('gemini usage', USAGE, geminiUsage);
await run('gemini usage without cache or thoughts', 'n=2&gap=0&prompt_tokens=5', geminiUsage);
await run('ollama usage', 'n=3&gap=0&format=ollama&prompt_tokens=11', ollamaUsage);
await run('ollama usage zeros omitted', 'n=0&format=ollama&prompt_tokens=0', ollamaUsage);
