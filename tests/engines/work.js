// SPDX-License-Identifier: MIT
// The Deno and Bun workload of tests/test_engines.py (ES module, no
// require): fib and mix are hot; the test reads their line ranges from
// this file.  Runs for argv[1] milliseconds (default 1000).
function fib(n) {
  return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

function mix(seed, n) {
  let h = seed | 0;
  for (let i = 0; i < n; i++) {
    h = Math.imul(h ^ (h >>> 15) ^ i, 0x2c1b3c6d) >>> 0;
  }
  return h;
}

const arg = typeof Deno !== "undefined" ? Deno.args[0] : process.argv[2];
const end = Date.now() + Number(arg || 1000);
let acc = 0;
while (Date.now() < end) {
  acc += fib(20) + mix(acc, 5000);
}
console.log(acc);
