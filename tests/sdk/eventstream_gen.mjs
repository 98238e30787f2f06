// Random event-stream messages encoded by the reference codec,
// @smithy/eventstream-codec (pinned in package.json), for streamguard's
// decoder to read back: tests/sdk/eventstream_check.c.
//
// Seeded, so a failure replays: every header type with values at and near
// their edges, names of 1 to 255 bytes, the four reserved headers, empty and
// large payloads (up to 1 MiB), messages with hundreds of headers and one
// with a header block near AWS's 128 KiB.  Each message is encoded, then
// decoded again by the same codec, and the description written is what the
// reference decoder read (checked equal to what was meant): so our decoder
// is held to the reference codec's reading, not to this script's intent.
//
// Usage: node eventstream_gen.mjs OUTDIR [SEED]
// Writes OUTDIR/messages.bin (the messages back to back) and
// OUTDIR/messages.jsonl (one description a line, in stream order; the format
// is tests/data/eventstream/README.md's).
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { EventStreamCodec, Int64 } from "@smithy/eventstream-codec";
import { fromUtf8, toUtf8 } from "@smithy/util-utf8";

const [outDir, seedArg] = process.argv.slice(2);
if (!outDir) {
  console.error("usage: node eventstream_gen.mjs OUTDIR [SEED]");
  process.exit(2);
}
let seed = Number(seedArg ?? 19) >>> 0;

// mulberry32: small, seeded, good enough to pick test cases.
function rand() {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1)); // inclusive
const pick = (xs) => xs[int(0, xs.length - 1)];
const bytes = (n) => {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = int(0, 255);
  return b;
};
const hex = (b) => Buffer.from(b).toString("hex");

const ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/ ";
const UNICODE = ["é", "ß", "中", "文", "😀", "Ω", "\u0000", "\u007f"];
function text(maxBytes, unicode) {
  let s = "";
  for (;;) {
    const c = unicode && rand() < 0.2 ? pick(UNICODE) : pick([...ALPHABET]);
    if (fromUtf8(s + c).byteLength > maxBytes) return s;
    s += c;
    if (rand() < 1 / Math.max(2, maxBytes / 3)) return s;
  }
}

// A header name: never an array index (a JS object would reorder it), and
// unique within its message (the codec's headers are a map).
function name(used) {
  for (;;) {
    const long = rand() < 0.05;
    const n = long ? "h" + "n".repeat(254) : "h" + text(int(0, 40), rand() < 0.3);
    if (fromUtf8(n).byteLength <= 255 && !used.has(n)) {
      used.add(n);
      return n;
    }
  }
}

const edges = {
  byte: [-128, -1, 0, 1, 127],
  short: [-32768, -1, 0, 1, 32767],
  integer: [-2147483648, -1, 0, 1, 2147483647],
};
function value(type) {
  switch (type) {
    case "boolean":
      return rand() < 0.5;
    case "byte":
    case "short":
    case "integer": {
      if (rand() < 0.3) return pick(edges[type]);
      const bits = { byte: 8, short: 16, integer: 32 }[type];
      return int(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1);
    }
    case "long": {
      const b = rand() < 0.2 ? pick([[0x80, 0, 0, 0, 0, 0, 0, 0], [0x7f, 255, 255, 255, 255, 255, 255, 255], [255, 255, 255, 255, 255, 255, 255, 255]]) : [...bytes(8)];
      return new Int64(Uint8Array.from(b));
    }
    case "binary":
      return bytes(rand() < 0.1 ? 0 : int(1, rand() < 0.1 ? 2000 : 64));
    case "string":
      return text(rand() < 0.1 ? 0 : int(1, 200), true);
    case "timestamp":
      // Date's own range is +-8.64e15 ms.
      return new Date(rand() < 0.2 ? pick([0, -1, 8.64e15, -8.64e15]) : int(-8.64e15, 8.64e15));
    case "uuid": {
      const h = hex(bytes(16));
      return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
    }
    default:
      throw new Error(type);
  }
}
const TYPES = ["boolean", "byte", "short", "integer", "long", "binary", "string", "timestamp", "uuid"];
const WIRE = { byte: 2, short: 3, integer: 4, long: 5, binary: 6, string: 7, timestamp: 8, uuid: 9 };

function int64Decimal(i64) {
  let v = 0n;
  for (const b of i64.bytes) v = (v << 8n) | BigInt(b);
  return BigInt.asIntN(64, v).toString();
}

// The description of one header as the reference decoder read it.
function describe(n, h) {
  const d = { n: hex(fromUtf8(n)) };
  switch (h.type) {
    case "boolean":
      return { ...d, t: h.value ? 0 : 1, i: h.value ? "1" : "0" };
    case "byte":
    case "short":
    case "integer":
      return { ...d, t: WIRE[h.type], i: String(h.value) };
    case "long":
      return { ...d, t: 5, i: int64Decimal(h.value) };
    case "timestamp":
      return { ...d, t: 8, i: String(h.value.valueOf()) };
    case "binary":
      return { ...d, t: 6, v: hex(h.value) };
    case "string":
      return { ...d, t: 7, v: hex(fromUtf8(h.value)) };
    case "uuid":
      return { ...d, t: 9, v: h.value.replace(/-/g, "") };
    default:
      throw new Error(`unexpected header type ${h.type}`);
  }
}

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

function plan(i) {
  // Fixed cases first, then random ones.
  const fixed = [
    { headers: 0, payload: 0 },
    { headers: 1, payload: 0 },
    { headers: 0, payload: 1 << 20 },
    { headers: 20, payload: (1 << 20) - 1 },
    { headers: 600, payload: 10 },
    { big: true, payload: 100 },
    { reserved: "event", headers: 2, payload: 300 },
    { reserved: "exception", headers: 0, payload: 60 },
    { reserved: "error", headers: 3, payload: 0 },
  ];
  if (i < fixed.length) return fixed[i];
  const r = rand();
  return {
    headers: r < 0.1 ? 0 : int(1, rand() < 0.1 ? 120 : 12),
    payload: rand() < 0.1 ? 0 : rand() < 0.05 ? int(4096, 200000) : int(1, 1500),
    reserved: rand() < 0.4 ? pick(["event", "exception", "error"]) : undefined,
  };
}

const codec = new EventStreamCodec(toUtf8, fromUtf8);
const COUNT = 260;
const chunks = [];
const lines = [];
for (let i = 0; i < COUNT; i++) {
  const p = plan(i);
  const used = new Set();
  const headers = {};
  if (p.reserved) {
    headers[":message-type"] = { type: "string", value: p.reserved };
    used.add(":message-type");
    if (p.reserved === "event") {
      headers[":event-type"] = { type: "string", value: pick(["contentBlockDelta", "messageStart", "chunk", "metadata"]) };
      used.add(":event-type");
    } else if (p.reserved === "exception") {
      headers[":exception-type"] = { type: "string", value: pick(["throttlingException", "modelStreamErrorException", "internalServerException"]) };
      used.add(":exception-type");
    }
    headers[":content-type"] = { type: "string", value: "application/json" };
    used.add(":content-type");
  }
  if (p.big) {
    // A header block near the 128 KiB maximum: four binary values of 32 KiB - 1.
    for (let k = 0; k < 4; k++) headers[name(used)] = { type: "binary", value: bytes(32767 - 300) };
  }
  for (let k = 0; k < (p.headers ?? 0); k++) {
    // Every type in turn, then at random.
    const type = k < TYPES.length ? TYPES[(k + i) % TYPES.length] : pick(TYPES);
    headers[name(used)] = { type, value: value(type) };
  }
  const body = bytes(p.payload);
  const wire = codec.encode({ headers, body });
  const back = codec.decode(wire);
  const meant = Object.entries(headers).map(([n, h]) => describe(n, h));
  const read = Object.entries(back.headers).map(([n, h]) => describe(n, h));
  if (!same(meant, read) || hex(back.body) !== hex(body)) {
    console.error(`message ${i}: the reference codec does not read back what it wrote`);
    process.exit(1);
  }
  chunks.push(wire);
  lines.push(JSON.stringify({ name: `m${i}`, total: wire.byteLength, headers: read, payload: hex(back.body) }));
}
writeFileSync(join(outDir, "messages.bin"), Buffer.concat(chunks));
writeFileSync(join(outDir, "messages.jsonl"), lines.join("\n") + "\n");
console.log(`wrote ${COUNT} messages, ${chunks.reduce((n, c) => n + c.byteLength, 0)} bytes`);
