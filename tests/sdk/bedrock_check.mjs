// sg-fakemodel's Bedrock streams read by AWS's own client,
// @aws-sdk/client-bedrock-runtime (pinned in package.json): ConverseStream
// and InvokeModelWithResponseStream against sg-fakemodel --sigv4-key, the
// SDK signing every request with its own SigV4 signer (a third signer the
// verifier is held to) and decoding the event stream with its own codec.
// For each scripted scenario the SDK must make of it what was scripted
// (the text, the stop reason, the exception's name), and `sg-stream
// --profile bedrock-converse|bedrock-invoke --aws-sigv4` on the same stream
// must agree with it: the same text, an error exactly when the SDK raised
// one, the same exception type.  A known disagreement (the SDK silent on a
// stream cut before its end) must be exactly that.  Prints a line per
// check, "ok: ..." or "FAIL: ..."; exits 1 on any failure.
//
// Usage: node bedrock_check.mjs BASE_URL SG_STREAM KEY_ID SECRET
import { spawnSync } from 'node:child_process';
import {
  BedrockRuntimeClient,
  ConverseStreamCommand,
  InvokeModelWithResponseStreamCommand,
} from '@aws-sdk/client-bedrock-runtime';

const [base, sgStream, keyId, secret] = process.argv.slice(2);
let failures = 0;
const check = (ok, what) => {
  console.log(`${ok ? 'ok' : 'FAIL'}: ${what}`);
  failures += ok ? 0 : 1;
};

// A client whose every request carries the scenario in X-SG-Scenario
// (added before signing, so it is signed like any header).
function client(scenario) {
  const c = new BedrockRuntimeClient({
    region: 'us-east-1',
    endpoint: base,
    credentials: { accessKeyId: keyId, secretAccessKey: secret },
    maxAttempts: 1, // the SDK's own retries off: one stream per case
  });
  c.middlewareStack.add((next) => (args) => {
    args.request.headers['x-sg-scenario'] = scenario;
    return next(args);
  }, { step: 'build', name: 'sgScenario' });
  return c;
}

const input = { modelId: 'sg-fake', messages: [{ role: 'user', content: [{ text: 'hi' }] }] };

// What the SDK made of a ConverseStream: text, stop reason, usage (the
// metadata event's, as the SDK decodes it), error.
async function sdkConverse(scenario) {
  const t0 = Date.now();
  const out = { text: '', stop: null, outputTokens: null, usage: null, error: null, firstTokenMs: null };
  try {
    const res = await client(scenario).send(new ConverseStreamCommand(input));
    for await (const ev of res.stream) {
      const t = ev.contentBlockDelta?.delta?.text;
      if (t) {
        out.firstTokenMs ??= Date.now() - t0;
        out.text += t;
      }
      if (ev.messageStop) out.stop = ev.messageStop.stopReason;
      if (ev.metadata) {
        out.outputTokens = ev.metadata.usage?.outputTokens ?? null;
        out.usage = ev.metadata.usage ?? null;
      }
    }
  } catch (e) {
    out.error = e?.name ?? String(e);
  }
  return out;
}

// The text inside InvokeModelWithResponseStream's chunks: the model's own
// events (Claude's), JSON in base64.
const modelText = (ev) => (ev.type === 'content_block_delta' ? ev.delta?.text ?? '' : '');

// Beside the text: Claude's own usage (message_start's, and the cumulative
// message_delta's) and Bedrock's invocation metrics, which belong on the
// last chunk (`metrics` is the last chunk's, null when it has none).
async function sdkInvoke(scenario) {
  const t0 = Date.now();
  const out = {
    text: '', stop: null, error: null, firstTokenMs: null,
    startUsage: null, deltaUsage: null, metrics: null,
  };
  try {
    const res = await client(scenario).send(new InvokeModelWithResponseStreamCommand({
      modelId: 'sg-fake', contentType: 'application/json',
      body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }),
    }));
    for await (const part of res.body) {
      if (!part.chunk) continue;
      const ev = JSON.parse(Buffer.from(part.chunk.bytes).toString('utf8'));
      const t = modelText(ev);
      if (t) {
        out.firstTokenMs ??= Date.now() - t0;
        out.text += t;
      }
      if (ev.type === 'message_delta') {
        out.stop = ev.delta?.stop_reason ?? null;
        out.deltaUsage = ev.usage ?? null;
      }
      if (ev.type === 'message_start') out.startUsage = ev.message?.usage ?? null;
      out.metrics = ev['amazon-bedrock-invocationMetrics'] ?? null;
    }
  } catch (e) {
    out.error = e?.name ?? String(e);
  }
  return out;
}

// sg-stream on the same stream: its items' text, outcome, time to first
// token, and the in-band error's type.
const sgTextOf = {
  'bedrock-converse': (it) =>
    it.event === 'contentBlockDelta' ? JSON.parse(it.data).delta?.text ?? '' : '',
  'bedrock-invoke': (it) =>
    it.event === 'chunk'
      ? modelText(JSON.parse(Buffer.from(JSON.parse(it.data).bytes, 'base64').toString()))
      : '',
};

function sg(profile, path, scenario) {
  const r = spawnSync(sgStream, ['--profile', profile, '--aws-sigv4', 'aws:amz:us-east-1:bedrock',
    '-d', JSON.stringify(input), '--output', 'jsonl', '--budget', '10s', '-q',
    '-H', `X-SG-Scenario: ${scenario}`,
    '-w', '\n%{outcome} %{first_token_ms} %{provider_error}\n', `${base}${path}`],
  { encoding: 'utf8', env: { ...process.env, AWS_ACCESS_KEY_ID: keyId, AWS_SECRET_ACCESS_KEY: secret } });
  const lines = r.stdout.split('\n').filter((l) => l.length > 0);
  const [outcome, ttft, type] = (lines.pop() ?? '').split(' ');
  const text = lines.map((l) => sgTextOf[profile](JSON.parse(l))).join('');
  return { text, outcome, type: type ?? '', firstTokenMs: Number(ttft) };
}

// The SDK's exception name for sg-stream's in-band type:
// throttlingException -> ThrottlingException.
const sdkName = (type) => type.charAt(0).toUpperCase() + type.slice(1);

function agree(name, sdk, got, known) {
  const sdkError = sdk.error !== null;
  const sgError = got.outcome !== 'ok';
  const typeOk = !sdkError || got.type === '' || sdkName(got.type) === sdk.error;
  const ok = sdk.text === got.text && sdkError === sgError && typeOk;
  if (known) {
    check(!ok && sdk.text === got.text && known(sdk, got),
      `${name}: the SDK and sg-stream disagree as documented ` +
      `(sdk ${JSON.stringify(sdk)}, sg-stream ${JSON.stringify(got)})`);
  } else {
    check(ok, `${name}: sg-stream --profile agrees with the SDK ` +
      `(sdk ${JSON.stringify(sdk)}, sg-stream ${JSON.stringify(got)})`);
  }
}

const CONVERSE = '/model/sg-fake/converse-stream';
const INVOKE = '/model/sg-fake/invoke-with-response-stream';
const silentOnTruncation = (sdk, got) => sdk.error === null && got.outcome === 'truncated';

async function converse(name, scenario, want, known) {
  const sdk = await sdkConverse(scenario);
  check(want(sdk), `${name}: the SDK reads what was scripted: ${JSON.stringify(sdk)}`);
  agree(name, sdk, sg('bedrock-converse', CONVERSE, scenario), known);
  return sdk;
}

await converse('converse normal', 'n=3', (s) =>
  s.text === 'tok0tok1tok2' && s.stop === 'end_turn' && s.outputTokens === 3 && s.error === null);
const slow = await converse('converse slow first token', 'n=3&first_delay=400', (s) =>
  s.text === 'tok0tok1tok2' && s.firstTokenMs >= 400);
check(sg('bedrock-converse', CONVERSE, 'n=3&first_delay=400').firstTokenMs >= 400 &&
  slow.firstTokenMs >= 400, 'converse slow first token: both see the token after 400 ms');
await converse('converse throttling before the first token', 'error_at=0&n=3', (s) =>
  s.text === '' && s.error === 'ThrottlingException');
await converse('converse throttling after the first token', 'error_at=1&n=3', (s) =>
  s.text === 'tok0' && s.error === 'ThrottlingException');
await converse('converse model stream error', 'error_at=0&error_type=modelStreamErrorException&n=3',
  (s) => s.error === 'ModelStreamErrorException');
await converse('converse validation exception', 'error_at=0&error_type=validationException&n=3',
  (s) => s.error === 'ValidationException');
await converse('converse bad message CRC', 'bad_crc_at=1&n=3', (s) =>
  s.text === 'tok0' && s.error !== null);
await converse('converse without its end events', 'n=3&no_done=1', (s) =>
  s.text === 'tok0tok1tok2' && s.stop === null && s.error === null, silentOnTruncation);

async function invoke(name, scenario, want, known) {
  const sdk = await sdkInvoke(scenario);
  check(want(sdk), `${name}: the SDK reads what was scripted: ${JSON.stringify(sdk)}`);
  agree(name, sdk, sg('bedrock-invoke', INVOKE, scenario), known);
  return sdk;
}

await invoke('invoke normal', 'n=3', (s) =>
  s.text === 'tok0tok1tok2' && s.stop === 'end_turn' && s.error === null);
await invoke('invoke model timeout', 'error_at=0&error_type=modelTimeoutException&n=3', (s) =>
  s.error === 'ModelTimeoutException');
await invoke('invoke throttling after the first token', 'error_at=1&n=3', (s) =>
  s.text === 'tok0' && s.error === 'ThrottlingException');

// Usage: 3 tokens, 11 prompt tokens of which 4 read from the cache (and,
// for Claude inside InvokeModel, 2 hidden thinking tokens); the SDK must
// read exactly these figures.  Bedrock's inputTokens leaves the cache out.
const json = (v) => JSON.stringify(v);
await converse('converse usage', 'n=3&prompt_tokens=11&cached_tokens=4', (s) =>
  s.text === 'tok0tok1tok2' && json(s.usage) ===
    '{"inputTokens":7,"outputTokens":3,"totalTokens":14,"cacheReadInputTokens":4,"cacheWriteInputTokens":0}');
await converse('converse usage without cache', 'n=2&prompt_tokens=5', (s) =>
  json(s.usage) === '{"inputTokens":5,"outputTokens":2,"totalTokens":7}');
const claudeUsage = '"input_tokens":7,"cache_creation_input_tokens":0,"cache_read_input_tokens":4';
const inv = await invoke('invoke usage', 'n=3&prompt_tokens=11&cached_tokens=4&reasoning_tokens=2',
  (s) => s.text === 'tok0tok1tok2' &&
    json(s.startUsage) === `{${claudeUsage},"output_tokens":1}` &&
    json(s.deltaUsage) === `{${claudeUsage},"output_tokens":5,"output_tokens_details":{"thinking_tokens":2}}` &&
    s.metrics !== null && s.metrics.inputTokenCount === 7 && s.metrics.outputTokenCount === 5 &&
    s.metrics.cacheReadInputTokenCount === 4 && s.metrics.cacheWriteInputTokenCount === 0);
check(inv.metrics !== null &&
  json(Object.keys(inv.metrics)) === json(['inputTokenCount', 'outputTokenCount', 'invocationLatency',
    'firstByteLatency', 'cacheReadInputTokenCount', 'cacheWriteInputTokenCount']) &&
  Number.isInteger(inv.metrics.invocationLatency) && Number.isInteger(inv.metrics.firstByteLatency) &&
  inv.metrics.firstByteLatency <= inv.metrics.invocationLatency,
`invoke usage: the invocation metrics' fields and latencies: ${json(inv.metrics)}`);

process.exit(failures === 0 ? 0 : 1);
