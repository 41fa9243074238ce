// SPDX-License-Identifier: MIT
// Workload for bench/bench-elf.sh: creates many distinct `new Function`
// bodies and calls each a few times, so that node run with
//
//   node --perf-prof --perf-prof-unwinding-info \
//        --interpreted-frames-native-stack --always-sparkplug \
//        bench/gen-big-node.js [COUNT] [STATEMENTS] [CALLS]
//
// writes a large ./jit-PID.dump (about 60 MB with the defaults on node 20:
// every body gets an interpreter-trampoline copy, a Sparkplug body, an
// UNWINDING_INFO and a DEBUG_INFO record).
//
//   COUNT       number of distinct functions        (default 20000)
//   STATEMENTS  statements in each function body    (default 1)
//   CALLS       calls of each function              (default 3)
//
// Output on stdout: one line "gen-big-node: COUNT functions, checksum N".
'use strict';

const count = parseInt(process.argv[2] || '20000', 10);
const statements = parseInt(process.argv[3] || '1', 10);
const calls = parseInt(process.argv[4] || '3', 10);

if (!(count > 0 && statements > 0 && calls > 0)) {
  console.error('usage: gen-big-node.js [COUNT] [STATEMENTS] [CALLS]');
  process.exit(2);
}

// Each body is different (constants and shape depend on i), so V8 cannot
// share bytecode or code between them.
function body(i) {
  const lines = [`let acc = x ^ ${i};`];
  for (let s = 0; s < statements; s++) {
    const k = (i * 31 + s * 7) % 97 + 1;
    switch ((i + s) % 4) {
      case 0: lines.push(`acc = (acc + ${k} * y) | 0;`); break;
      case 1: lines.push(`if (acc & ${k}) acc = (acc ^ ${k * 3}) | 0; else acc = (acc - y) | 0;`); break;
      case 2: lines.push(`for (let j = 0; j < ${(s % 3) + 1}; j++) acc = (acc * ${k} + j) | 0;`); break;
      default: lines.push(`acc = (acc >>> ${(k % 7) + 1}) + o.v${i % 5};`); break;
    }
  }
  lines.push('return acc;');
  return lines.join('\n');
}

const o = { v0: 1, v1: 2, v2: 3, v3: 4, v4: 5 };
let checksum = 0;
for (let i = 0; i < count; i++) {
  const f = new Function('x', 'y', 'o', body(i));
  for (let c = 0; c < calls; c++)
    checksum = (checksum + f(i + c, c + 1, o)) | 0;
}
console.log(`gen-big-node: ${count} functions, checksum ${checksum}`);
