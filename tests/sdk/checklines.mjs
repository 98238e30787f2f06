// The check lines the SDK scripts print (proxy_check.mjs,
// limits_check.mjs): "ok: WHAT", or "FAIL: WHAT: DETAIL" (a string as it
// is, anything else as JSON); exitCode() is 1 once any check failed.
let failures = 0;

export function check(what, cond, detail) {
  if (cond) {
    console.log(`ok: ${what}`);
    return;
  }
  failures += 1;
  const d = typeof detail === 'string' ? detail : JSON.stringify(detail);
  console.log(`FAIL: ${what}${detail === undefined ? '' : `: ${d}`}`);
}

export const exitCode = () => (failures === 0 ? 0 : 1);
