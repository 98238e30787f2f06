// Runs the providers' official SDKs (pinned in package.json) against
// sg-fakemodel and prints, for each scenario, what the SDK made of the
// stream: the text it produced, and the error it raised (class, type,
// message) - one JSON line per case.  The shell test compares them with
// what sg-fakemodel was scripted to send.  With SG_STREAM, it also runs
// `sg-stream --profile` on the same stream and prints a second line per
// case saying whether the two agree: on the text, on whether the stream
// ended in error, and on the error's type when the SDK names one.
//
// Usage: node check.mjs BASE_URL [SG_STREAM]
import { spawnSync } from 'node:child_process';
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import OpenAI from 'openai';

const base = process.argv[2];
const sgStream = process.argv[3];

// What sg-stream --profile makes of the same stream: the text of its items
// (read the way each provider's text is carried), its outcome, and the
// in-band error's type.
const sgText = {
  openai: (ev) => JSON.parse(ev.data).choices?.[0]?.delta?.content ?? '',
  anthropic: (ev) =>
    ev.event === 'content_block_delta' ? JSON.parse(ev.data).delta?.text ?? '' : '',
  ollama: (ev) => JSON.parse(ev.data).message?.content ?? '',
};
const sgPath = { openai: '/v1/chat/completions', anthropic: '/v1/messages', ollama: '/api/chat' };

function sgRun(profile, scenario) {
  const r = spawnSync(sgStream, ['--profile', profile, '--output', 'jsonl', '--budget', '10s',
    '-H', `X-SG-Scenario: ${scenario}`, '-w', '\n%{outcome} %{provider_error}\n',
    '-q', `${base}${sgPath[profile]}`], { encoding: 'utf8' });
  const lines = r.stdout.split('\n').filter((l) => l.length > 0);
  const [outcome, type] = lines.pop().split(' ');
  const text = lines.map((l) => sgText[profile](JSON.parse(l))).join('');
  return { text, outcome, type: type ?? '' };
}

function agree(name, profile, scenario, sdk) {
  if (!sgStream) {
    return;
  }
  const sg = sgRun(profile, scenario);
  const sdkError = sdk.error !== null;
  const sgError = sg.outcome !== 'ok';
  const ok = sg.text === sdk.text && sdkError === sgError &&
    (!sdkError || sdk.error.type === null || sdk.error.type === sg.type);
  console.log(JSON.stringify({ case: name, agree: ok, sdk: { text: sdk.text, error: sdk.error?.type ?? sdkError }, sg }));
}

async function run(name, scenario, fn) {
  const out = { case: name, text: '', error: null };
  try {
    out.text = await fn(scenario);
  } catch (e) {
    out.error = {
      class: e?.constructor?.name ?? typeof e,
      type: e?.error?.error?.type ?? e?.error?.type ?? e?.type ?? null,
      message: String(e?.message ?? e).slice(0, 200),
    };
    out.text = e.partialText ?? out.text;
  }
  console.log(JSON.stringify(out));
  agree(name, fn.profile, scenario, out);
}

async function openaiText(scenario) {
  const client = new OpenAI({
    baseURL: `${base}/v1`,
    apiKey: 'sk-test',
    maxRetries: 0,
    defaultHeaders: { 'X-SG-Scenario': scenario },
  });
  const stream = await client.chat.completions.create({
    model: 'sg-fakemodel',
    messages: [{ role: 'user', content: 'hi' }],
    stream: true,
  });
  let text = '';
  try {
    for await (const chunk of stream) {
      text += chunk.choices?.[0]?.delta?.content ?? '';
    }
  } catch (e) {
    e.partialText = text;
    throw e;
  }
  return text;
}

async function anthropicText(scenario) {
  const client = new Anthropic({
    baseURL: base,
    apiKey: 'sk-ant-test',
    maxRetries: 0,
    defaultHeaders: { 'X-SG-Scenario': scenario },
  });
  const stream = await client.messages.create({
    model: 'sg-fakemodel',
    max_tokens: 64,
    messages: [{ role: 'user', content: 'hi' }],
    stream: true,
  });
  let text = '';
  try {
    for await (const ev of stream) {
      if (ev.type === 'content_block_delta' && ev.delta?.type === 'text_delta') {
        text += ev.delta.text;
      }
    }
  } catch (e) {
    e.partialText = text;
    throw e;
  }
  return text;
}

async function ollamaText(scenario) {
  const client = new Ollama({ host: base, headers: { 'X-SG-Scenario': scenario } });
  const stream = await client.chat({
    model: 'sg-fakemodel',
    messages: [{ role: 'user', content: 'hi' }],
    stream: true,
  });
  let text = '';
  try {
    for await (const part of stream) {
      text += part.message?.content ?? '';
    }
  } catch (e) {
    e.partialText = text;
    throw e;
  }
  return text;
}

openaiText.profile = 'openai';
anthropicText.profile = 'anthropic';
ollamaText.profile = 'ollama';

await run('openai normal', 'n=3&gap=0', openaiText);
await run('openai role chunk', 'n=3&gap=0&role_chunk=1', openaiText);
await run('openai error after 2', 'n=5&gap=0&error_at=2', openaiText);
await run('openai error then [DONE]', 'n=5&gap=0&error_at=1&error_then_done=1&error_type=rate_limit_error', openaiText);
await run('anthropic normal', 'n=3&gap=0', anthropicText);
await run('anthropic ping keepalive', 'n=2&gap=120&keepalive=40', anthropicText);
await run('anthropic error after 1', 'n=5&gap=0&error_at=1', anthropicText);
await run('ollama normal', 'n=3&gap=0&format=ollama', ollamaText);
await run('ollama error after 2', 'n=5&gap=0&error_at=2&format=ollama', ollamaText);
