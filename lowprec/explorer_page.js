// The explorer page's script (lowprec/explorer.py inlines it into explorer_page.html).
"use strict";
const DATA = /*LOWPREC_DATA*/null;

// ---------------------------------------------------------------- tables
function b64bytes(s) {
  const bin = atob(s), out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}
// Each format carries the values of its magnitude codes (sign bit clear), computed by
// lowprec.decode; a code with the sign bit set is the negated value (NaN stays NaN), except
// the fnuz formats' lone NaN at the code of -0. The browser test checks every code.
function prepare(f) {
  const bytes = b64bytes(f.magnitudes);
  const mags = f.dtype === "f4" ? new Float32Array(bytes.buffer) : new Float64Array(bytes.buffer);
  const n = 1 << f.width, vals = new Float64Array(n);
  const half = f.signed ? n >> 1 : n;
  for (let c = 0; c < half; c++) vals[c] = mags[c];
  if (f.signed) {
    for (let c = half; c < n; c++) vals[c] = -mags[c - half];
    if (f.nan === "negzero") vals[half] = NaN;
  }
  f.values = vals;
  f.signMask = f.signed ? half : 0;
  f.maxMag = f.max_code_magnitude;
  f.topStep = Math.pow(2, f.emax - f.m);  // the step above max, had the format one more code
  f.beyond = f.max + f.topStep;
}

// ---------------------------------------------------------------- helpers
function bitsOf(code, f) {
  let s = code.toString(2).padStart(f.width, "0"), out = [];
  let k = 0;
  if (f.signed) { out.push(s[0]); k = 1; }
  out.push(s.slice(k, k + f.e));
  if (f.m) out.push(s.slice(k + f.e));
  return "0b" + out.join("_");
}
function hex(code, f) { return "0x" + code.toString(16).padStart(Math.ceil(f.width / 4), "0"); }
function show(v) {
  if (Number.isNaN(v)) return "nan";
  if (v === Infinity) return "inf";
  if (v === -Infinity) return "-inf";
  if (v === 0) return Object.is(v, -0) ? "-0.0" : "0.0";
  return String(v);
}
function classOf(v, f) {
  if (Number.isNaN(v)) return "NaN";
  if (!Number.isFinite(v)) return "inf";
  if (v === 0) return "zero";
  return Math.abs(v) < f.smallest_normal ? "subnormal" : "normal";
}
// The neighbours of a code in value order (not code order). Magnitude codes 0..maxMag are
// sorted by value; crossing zero, the next value is the smallest one of the other sign.
function neighbours(code, f) {
  if (!Number.isFinite(f.values[code])) return [null, null];
  const neg = f.signed && (code & f.signMask) !== 0;
  const mag = neg ? code - f.signMask : code;
  const withSign = (m, negative) =>
    (negative && !(m === 0 && !f.has_negative_zero) ? m + f.signMask : m);
  const away = mag < f.maxMag ? withSign(mag + 1, neg) : null;
  let toward;
  if (mag > 0) toward = withSign(mag - 1, neg);
  else toward = f.signed ? withSign(1, !neg) : null;        // across zero (+0 = -0)
  return neg ? [away, toward] : [toward, away];
}

// ---------------------------------------------------------------- rounding
// The rules of lowprec.round_to (see lowprec/rounding.py), decided on magnitudes between two
// neighbours taken from the table. Returns {code} or {error}; stochastic: {lo, hi, pUp}.
function overflowCode(neg, f, mode, saturate) {
  const towardZero = mode === "rtz" || mode === "odd" ||
                     (mode === "rup" && neg) || (mode === "rdown" && !neg);
  const sign = neg ? f.signMask : 0;
  if (saturate || towardZero) return sign + f.maxMag;
  if (f.has_inf) return sign + f.maxMag + 1;                  // the infinity follows max
  if (f.nan !== "none") return neg ? f.nan_neg : f.nan_pos;   // no infinity: NaN
  return sign + f.maxMag;                                      // neither: saturates
}
function bracket(a, f) {
  // magnitudes lo <= a < hi as magnitude codes (hi may be maxMag + 1: beyond the format)
  let lo = 0, hi = f.maxMag + 1;
  const val = c => (c <= f.maxMag ? f.values[c] : f.beyond);
  if (a >= f.beyond) return [f.maxMag + 1, f.maxMag + 1];
  while (hi - lo > 1) { const mid = (lo + hi) >> 1; if (val(mid) <= a) lo = mid; else hi = mid; }
  return [lo, hi];
}
function roundJS(x, f, mode, saturate) {
  const r = roundCore(x, f, mode, saturate);
  return mode === "stochastic" && r.code !== undefined ? {lo: r.code, hi: r.code, pUp: 0} : r;
}
function roundCore(x, f, mode, saturate) {
  if (Number.isNaN(x)) {
    return f.nan === "none" ? {error: f.name + " has no NaN encoding (lowprec raises ValueError)"}
                            : {code: f.nan_pos};
  }
  const neg = x < 0 || Object.is(x, -0);
  if (!f.signed && ((neg && x !== 0) || (x === 0 && !f.has_subnormals)))
    return {code: f.nan_pos};                                   // unsigned: no sign; e8m0: no zero
  if (!f.signed && x === 0) return {code: 0};                   // ue5m3: +0 and -0 are 0
  if (!Number.isFinite(x)) {
    if (saturate || (!f.has_inf && f.nan === "none")) return {code: (neg ? f.signMask : 0) + f.maxMag};
    return {code: f.has_inf ? (neg ? f.signMask : 0) + f.maxMag + 1 : (neg ? f.nan_neg : f.nan_pos)};
  }
  const a = Math.abs(x);
  if (!f.signed && a < f.values[0]) return {code: 0};          // e8m0: below 2^-127
  const sign = neg ? f.signMask : 0;
  const [lo, hi] = bracket(a, f);
  const val = c => (c <= f.maxMag ? f.values[c] : f.beyond);
  const pack = c => {
    if (c > f.maxMag) return overflowCode(neg, f, mode, saturate);
    if (c === 0 && !f.has_negative_zero) return 0;             // fnuz: zero is +0
    return sign + c;
  };
  if (lo === hi || val(lo) === a) return {code: pack(lo)};   // beyond the top, or exact
  const dLo = a - val(lo), dHi = val(hi) - a;               // exact: Sterbenz
  let pick;
  switch (mode) {
    case "rne":
      if (dLo !== dHi) pick = dLo < dHi ? lo : hi;
      else if (f.m === 0) pick = hi;                          // 1-bit significands: ties carry
      else pick = (lo & 1) === 0 ? lo : hi;
      break;
    case "rna": pick = dLo < dHi ? lo : hi; break;
    case "rtz": pick = lo; break;
    case "rup": pick = neg ? lo : hi; break;
    case "rdown": pick = neg ? hi : lo; break;
    case "odd": pick = (lo & 1) === 1 || f.m === 0 ? lo : hi; break;
    case "stochastic": {
      const p = dLo / (val(hi) - val(lo));
      return {lo: pack(lo), hi: pack(hi), pUp: p};
    }
  }
  return {code: pack(pick)};
}

// ---------------------------------------------------------------- MX / NVFP4
function floorLog2(v) {  // exact floor(log2 v) for positive finite v
  const dv = new DataView(new ArrayBuffer(8));
  dv.setFloat64(0, v);
  const hiWord = dv.getUint32(0), ef = (hiWord >>> 20) & 0x7ff;
  if (ef === 0) return floorLog2(v * Math.pow(2, 64)) - 64;   // float64 subnormal
  return ef - 1023;
}
function mxQuantize(xs, mxf) {
  const el = DATA.byName[mxf.element], e8 = DATA.byName["e8m0"];
  let amax = 0, bad = false;
  for (const x of xs) { if (!Number.isFinite(x)) bad = true; else amax = Math.max(amax, Math.abs(x)); }
  let scaleCode;
  if (bad) scaleCode = 0xff;
  else if (amax === 0) scaleCode = 0;
  else {
    let k = floorLog2(amax) - mxf.emax_elem;
    scaleCode = k > 127 ? 0xff : Math.max(k, -127) + 127;
  }
  const scale = e8.values[scaleCode];
  let note = "";
  if (bad) note = "The block holds inf or NaN: its scale is NaN (E8M0 0xff) and every element " +
    "dequantizes to NaN (OCP MX v1.0; lowprec.mx.quantize).";
  else if (scaleCode === 0xff) note = "amax " + show(amax) + " needs the scale 2^" +
    (floorLog2(amax) - mxf.emax_elem) + ", above E8M0's largest 2^127: the scale is NaN (0xff) " +
    "and the block dequantizes to NaN (as lowprec.mx.quantize and the OCP reference code).";
  else if (xs.some(x => Math.abs(x) / scale > el.max)) note = "Elements beyond " + show(el.max) +
    " \u00d7 scale saturate to \u00b1" + show(el.max) + " \u00d7 scale = \u00b1" +
    show(el.max * scale) + " (MX elements never overflow to inf or NaN).";
  const codes = xs.map(x => (scaleCode === 0xff ? 0 : roundJS(x / scale, el, "rne", true).code));
  return {scaleCode, scale, scaleText: scaleCode === 0xff ? "NaN (E8M0 0xff)"
          : "2^" + (scaleCode - 127) + " = " + show(scale) + " (E8M0 code " + hex(scaleCode, e8) + ")",
          codes, element: el, note, deq: codes.map(c => (scaleCode === 0xff ? NaN : el.values[c] * scale))};
}
function nvfp4Quantize(xs, mxf) {
  // lowprec.nvfp4.quantize, step by step in float32 (Math.fround) as Transformer Engine does;
  // mxf: the block size, the block-scale format and whether there is a tensor scale
  const F = Math.fround, el = DATA.byName["fp4_e2m1"], e4 = DATA.byName[mxf.scale];
  const bs = mxf.block, nanCode = e4.nan_pos, sName = mxf.scale === "ue5m3" ? "UE5M3" : "E4M3";
  const FLT_MAX = F(3.4028234663852886e38);
  const x32 = xs.map(F);
  const toInf = xs.filter((x, i) => Number.isFinite(x) && !Number.isFinite(x32[i]));
  const note = (toInf.length ? show(toInf[0]) + " is beyond float32's range (NVFP4 takes FP32 " +
    "input): it becomes inf. " : "") + (x32.some(v => !Number.isFinite(v))
    ? "A block of " + bs + " holding inf or NaN gets the " + sName + " NaN scale (" +
      hex(nanCode, e4) + ") and dequantizes to NaN (lowprec.nvfp4.quantize)." : "");
  const blocks = [];
  for (let i = 0; i < x32.length; i += bs) blocks.push(x32.slice(i, i + bs));
  const bAmax = blocks.map(b => b.reduce((m, v) => (Number.isFinite(v) ? Math.max(m, Math.abs(v)) : m), 0));
  const bad = blocks.map(b => b.some(v => !Number.isFinite(v)));
  const amax = F(Math.max(0, ...bAmax));
  let sEnc = Math.min(F(F(448 * 6) / amax), FLT_MAX);
  if (amax === 0 || sEnc === 0 || Number.isNaN(sEnc) || !mxf.tensor_scale) sEnc = 1;
  sEnc = F(sEnc);
  const sDec = F(1 / sEnc), sixth = F(1 / 6);
  const codes = [], deq = [], scales = [];
  blocks.forEach((b, k) => {
    const sb = F(bAmax[k] * F(sEnc * sixth));
    let sc = roundJS(Math.min(sb, FLT_MAX), e4, "rne", true).code;
    const sBlock = F(e4.values[sc]);
    const rcp = Math.min(F(1 / F(sBlock * sDec)), FLT_MAX);
    if (bad[k]) sc = nanCode;
    scales.push(sc);
    for (const v of b) {
      const c = bad[k] ? 0 : roundJS(F(v * rcp), el, "rne", true).code;
      codes.push(c);
      deq.push(bad[k] ? NaN : el.values[c] * e4.values[sc] * sDec);
    }
  });
  const text = (mxf.tensor_scale ? "per tensor (FP32) " + show(sDec) + "; " : "no tensor scale; ") +
    "per block of " + bs + " (" + sName + "): " +
    scales.map(c => show(e4.values[c]) + " (" + hex(c, e4) + ")").join(", ");
  return {codes, deq, element: el, scaleText: text, scales, sDec, note};
}

// ---------------------------------------------------------------- page state
const $ = id => document.getElementById(id);
const state = {format: null, code: 0, value: "0.1", saturate: false, mx: "", mxformat: "mxfp4"};

function readURL() {
  const q = new URLSearchParams(location.search);
  const name = q.get("format");
  state.format = DATA.byName[name] ? name : DATA.formats[0].name;
  // A wrong address is said in its own line (update() never rewrites it), as text, not HTML.
  const problems = [];
  if (name !== null && !DATA.byName[name]) problems.push("unknown format \u201c" + name +
    "\u201d in the address (?format=); known: " + DATA.formats.map(g => g.name).join(", ") +
    " (a custom eXmY only when the page was written with lowprec explore --format eXmY)");
  const f = DATA.byName[state.format];
  state.value = q.has("value") ? q.get("value") : "0.1";
  state.saturate = q.get("saturate") === "1";
  state.mx = q.has("mx") ? q.get("mx") : DATA.mx_example;
  const mxName = q.get("mxformat");
  state.mxformat = mxName !== null && DATA.mxByName[mxName] ? mxName : "mxfp4";
  if (mxName !== null && !DATA.mxByName[mxName]) problems.push("unknown block format \u201c" +
    mxName + "\u201d in the address (?mxformat=); known: " + DATA.mx.map(m => m.name).join(", "));
  const c = q.has("code") ? parseCode(q.get("code")) : NaN;
  if (Number.isInteger(c) && c >= 0 && c < (1 << f.width)) state.code = c;
  else {
    if (q.has("code")) problems.push("code \u201c" + q.get("code") + "\u201d in the address " +
      "(?code=) is not a code of " + f.name + ": give 0x0 to " + hex((1 << f.width) - 1, f));
    const x = parseNumber(state.value), r = x === undefined ? {} : roundJS(x, f, "rne", false);
    state.code = r.code !== undefined ? r.code : 0;
  }
  if (problems.length) $("url-error").textContent = problems.join(". ") + ". Showing " +
    state.format + " and " + state.mxformat + " instead.";
}
function writeURL() {
  const q = new URLSearchParams({format: state.format, code: hex(state.code, DATA.byName[state.format]),
                                 value: state.value});
  if (state.saturate) q.set("saturate", "1");
  q.set("mx", state.mx); q.set("mxformat", state.mxformat);
  try { history.replaceState(null, "", "?" + q.toString()); } catch (e) { /* file:// in some browsers */ }
}

function renderFormat() {
  const f = DATA.byName[state.format];
  $("facts").textContent = f.description + " — " + f.width + " bits: " + (f.signed ? "1 sign, " : "no sign, ") +
    f.e + " exponent (bias " + f.bias + "), " + f.m + " mantissa; max " + show(f.max) +
    ", smallest normal " + show(f.smallest_normal) + ", smallest > 0 " + show(f.smallest_positive) +
    "; inf: " + (f.has_inf ? "yes" : "no") + ", NaN: " + f.nan;
}
function renderCode() {
  const f = DATA.byName[state.format], code = state.code, v = f.values[code];
  const box = $("bits"); box.innerHTML = "";
  for (let i = f.width - 1; i >= 0; i--) {
    const b = document.createElement("button");
    const pos = f.width - 1 - i;
    const kind = f.signed && pos === 0 ? "s" : (i >= f.m ? "e" : "m");
    b.className = "bit " + kind;
    b.id = "bit-" + i;
    b.innerHTML = ((code >> i) & 1) + "<small>" + kind + "</small>";
    b.title = "flip bit " + i;
    b.onclick = () => { state.code = code ^ (1 << i); update(); };
    box.appendChild(b);
  }
  $("code-in").value = hex(code, f);
  $("value").textContent = show(v);
  $("class").textContent = classOf(v, f);
  const sgn = f.signed ? (code >> (f.width - 1)) & 1 : 0;
  const ef = (code >> f.m) & ((1 << f.e) - 1), mf = code & ((1 << f.m) - 1);
  let formula = bitsOf(code, f) + ": sign " + sgn + ", exponent field " + ef + ", mantissa field " + mf;
  if (Number.isFinite(v) && v !== 0) {
    formula += (ef === 0 && f.has_subnormals)
      ? " → subnormal: " + (sgn ? "-" : "+") + "(" + mf + "/" + (1 << f.m) + ") × 2^" + f.emin
      : " → " + (sgn ? "-" : "+") + "(1 + " + mf + "/" + (1 << f.m) + ") × 2^(" + ef + "-" + f.bias + ")";
  }
  $("formula").textContent = formula;
  const [lo, hi] = neighbours(code, f);
  $("nb-lo-code").textContent = lo === null ? "—" : hex(lo, f);
  $("nb-lo").textContent = lo === null ? "—" : show(f.values[lo]);
  $("nb-hi-code").textContent = hi === null ? "—" : hex(hi, f);
  $("nb-hi").textContent = hi === null ? "—" : show(f.values[hi]);
}
function ulpsText(x, v, gap) {
  if (!Number.isFinite(v)) return "overflow";
  if (gap === 0 || !Number.isFinite(gap)) return "0";
  return ((v - x) / gap).toFixed(4);
}
function renderRounding() {
  const f = DATA.byName[state.format], x = parseNumber(state.value);
  const tbl = $("round-table");
  while (tbl.rows.length > 1) tbl.deleteRow(1);
  if (x === undefined) {  // nothing is rounded: no table of NaN results for a typo
    $("x-note").className = "err";
    $("x-note").textContent = "\u201c" + state.value + "\u201d is not a number: type a decimal " +
      "number such as 0.1, -3e-5, 448 or 1e40, or inf, -inf, nan";
    return;
  }
  $("x-note").className = "note";
  $("x-note").textContent = "as a float64 (what lowprec.round_to receives from Python): " + show(x) +
    specialNote(x, f);
  let gap = NaN;
  if (Number.isFinite(x)) {
    const [lo, hi] = bracket(Math.abs(x), f);
    const val = c => (c <= f.maxMag ? f.values[c] : f.beyond);
    gap = lo === hi ? f.topStep : val(hi) - val(lo);
  }
  for (const [mode, meaning] of DATA.modes) {
    const r = roundJS(x, f, mode, state.saturate), row = tbl.insertRow();
    row.id = "round-" + mode;
    row.insertCell().textContent = mode;
    row.insertCell().textContent = meaning;
    const cCode = row.insertCell(), cVal = row.insertCell(), cErr = row.insertCell();
    cCode.className = cVal.className = cErr.className = "num";
    if (r.error) { cCode.textContent = "—"; cVal.innerHTML = '<span class="err">' + r.error + "</span>"; continue; }
    if (mode === "stochastic") {
      const vLo = f.values[r.lo], vHi = f.values[r.hi];
      cCode.textContent = hex(r.lo, f) + " / " + hex(r.hi, f);
      cVal.innerHTML = '<span class="sr-lo">' + show(vLo) + "</span> with p = <span class=\"sr-plo\">" +
        (1 - r.pUp).toPrecision(6) + '</span>, <span class="sr-hi">' + show(vHi) +
        '</span> with p = <span class="sr-phi">' + r.pUp.toPrecision(6) + "</span>";
      cErr.textContent = ulpsText(x, vLo, gap) + " / " + ulpsText(x, vHi, gap);
      continue;
    }
    cCode.textContent = hex(r.code, f) + " " + bitsOf(r.code, f);
    cVal.textContent = show(f.values[r.code]);
    cErr.textContent = ulpsText(x, f.values[r.code], gap);
  }
}
function renderMX() {
  const tbl = $("mx-table");
  while (tbl.rows.length > 1) tbl.deleteRow(1);
  const words = state.mx.split(/[\s,]+/).filter(s => s.length), xs = words.map(parseNumber);
  const mxf = DATA.mxByName[state.mxformat];
  $("mx-rule").textContent = mxf.rule;
  $("mx-note").textContent = "";
  const badWord = words.find(w => parseNumber(w) === undefined);
  if (!xs.length || xs.length > 32 || badWord !== undefined) {
    $("mx-scale").innerHTML = '<span class="err"></span>';
    $("mx-scale").firstChild.textContent = (badWord !== undefined
      ? "\u201c" + badWord + "\u201d is not a number; " : xs.length ? "too many numbers (" +
        xs.length + "); " : "no numbers; ") +
      "give 1 to 32 numbers separated by commas (e.g. 0.1, -3e-5, 1e40, inf, nan)";
    return;
  }
  const q = mxf.scale !== undefined ? nvfp4Quantize(xs, mxf) : mxQuantize(xs, mxf);
  $("mx-scale").textContent = q.scaleText;
  $("mx-note").textContent = q.note;
  xs.forEach((x, i) => {
    const row = tbl.insertRow(), c = q.codes[i];
    row.insertCell().textContent = i;
    row.insertCell().textContent = show(x);
    row.insertCell().textContent = hex(c, q.element) + " " + bitsOf(c, q.element);
    row.insertCell().textContent = show(q.element.values[c]);
    row.insertCell().textContent = show(q.deq[i]);
    row.insertCell().textContent = show(Number((q.deq[i] - x).toPrecision(6)));
    for (const cell of row.cells) cell.className = "num";
  });
}
function update() { renderFormat(); renderCode(); renderRounding(); renderMX(); writeURL(); }

// ---------------------------------------------------------------- self test (for the tests)
// ?selftest=decode : the value of every code of every format (float64 bits in hex);
// ?selftest=round&cases=fp16:0.1,-inf,...;bf16:... : for every format and value,
// each mode's code (stochastic: [lower code, upper code, probability up]), without and with
// saturation. The page's answers go into <pre id="selftest"> as JSON.
// A number typed or linked, read as Python's float() reads decimal text (what lowprec receives):
// decimal digits with an optional exponent, or inf/infinity/nan with a sign; anything else
// (empty, "abc", "0x10", "1,5") is undefined, never a silent NaN.
const NUMBER_TEXT = /^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/;
function parseNumber(s) {
  const t = s.trim().toLowerCase();
  const m = /^([-+]?)(inf|infinity|nan)$/.exec(t);
  if (m) return m[2] === "nan" ? NaN : (m[1] === "-" ? -Infinity : Infinity);
  return NUMBER_TEXT.test(t) ? Number(t) : undefined;
}
function parseCode(s) {  // 0x.. hex or decimal digits only; NaN otherwise
  const t = s.trim().toLowerCase();
  return /^0x[0-9a-f]+$/.test(t) ? parseInt(t, 16) : /^\d+$/.test(t) ? parseInt(t, 10) : NaN;
}
// What the format does with a number it cannot hold (lowprec.encode's rules): said beside it.
function specialNote(x, f) {
  if (Number.isNaN(x)) return f.nan === "none" ? "; " + f.name + " has no NaN: lowprec raises an error" : "";
  if (!f.signed && x < 0) return "; " + f.name + " has no sign: a negative number is its NaN";
  const sat = "\u00b1" + show(f.max);
  if (!Number.isFinite(x)) {
    if (f.has_inf) return "; an infinity stays inf in every mode (" + sat + " with saturate)";
    if (f.nan !== "none") return "; " + f.name + " has no infinity: an infinity becomes NaN in " +
      "every mode (" + sat + " with saturate)";
    return "; " + f.name + " has neither infinity nor NaN: an infinity saturates to " + sat +
      " in every mode";
  }
  if (Math.abs(x) < f.beyond) return "";
  if (f.has_inf || f.nan !== "none") return "; beyond the largest value: " +
    (f.has_inf ? "inf" : "NaN (" + f.name + " has no infinity)") + " in the modes that round " +
    "away from zero, " + sat + " toward zero or with saturate";
  return "; " + f.name + " has neither infinity nor NaN: beyond the largest value it saturates " +
    "to " + sat + " in every mode";
}
function selftest(kind) {
  const q = new URLSearchParams(location.search), out = {};
  if (kind === "decode") {
    const dv = new DataView(new ArrayBuffer(8));
    for (const f of DATA.formats) {
      const parts = [];
      for (const v of f.values) { dv.setFloat64(0, v); parts.push(dv.getBigUint64(0).toString(16).padStart(16, "0")); }
      out[f.name] = parts.join("");
    }
  } else {
    for (const group of (q.get("cases") || "").split(";").filter(g => g.length)) {
      const [name, list] = group.split(":");
      const f = DATA.byName[name], xs = list.split(",").map(parseNumber), res = {};
      for (const sat of [false, true]) {
        for (const [mode] of DATA.modes) {
          res[mode + (sat ? "+sat" : "")] = xs.map(x => {
            const r = roundJS(x, f, mode, sat);
            if (r.error) return null;
            return mode === "stochastic" ? [r.lo, r.hi, r.pUp] : r.code;
          });
        }
      }
      out[name] = res;
    }
  }
  $("selftest").textContent = JSON.stringify(out);
}

// ---------------------------------------------------------------- start
DATA.byName = {}; DATA.mxByName = {};
for (const f of DATA.formats) { prepare(f); DATA.byName[f.name] = f; }
for (const m of DATA.mx) DATA.mxByName[m.name] = m;
$("version").textContent = DATA.version;
$("not-shown").textContent = DATA.not_shown.length ? "Not here: " + DATA.not_shown.join(", ") +
  " (wider than 16 bits; lowprec explain shows them)." : "";
for (const f of DATA.formats) $("format").add(new Option(f.name + (f.custom ? " (custom)" : ""), f.name));
for (const m of DATA.mx) $("mx-format").add(new Option(m.name, m.name));
const test = new URLSearchParams(location.search).get("selftest");
if (test) selftest(test);
else {
  readURL();
  $("format").value = state.format;
  $("value-in").value = state.value;
  $("saturate").checked = state.saturate;
  $("mx-vector").value = state.mx;
  $("mx-format").value = state.mxformat;
  $("format").onchange = () => {
    state.format = $("format").value;
    const x = parseNumber(state.value);
    const r = x === undefined ? {} : roundJS(x, DATA.byName[state.format], "rne", false);
    state.code = r.code !== undefined ? r.code : 0;
    update();
  };
  $("code-in").onchange = () => {
    const f = DATA.byName[state.format], c = parseCode($("code-in").value);
    if (Number.isInteger(c) && c >= 0 && c < (1 << f.width)) state.code = c;
    update();
  };
  $("value-in").oninput = () => { state.value = $("value-in").value; renderRounding(); writeURL(); };
  $("value-in").onchange = () => {
    const x = parseNumber(state.value);
    const r = x === undefined ? {} : roundJS(x, DATA.byName[state.format], "rne", state.saturate);
    if (r.code !== undefined) state.code = r.code;
    update();
  };
  $("saturate").onchange = () => { state.saturate = $("saturate").checked; update(); };
  $("mx-vector").onchange = () => { state.mx = $("mx-vector").value; renderMX(); writeURL(); };
  $("mx-format").onchange = () => { state.mxformat = $("mx-format").value; renderMX(); writeURL(); };
  update();
}
