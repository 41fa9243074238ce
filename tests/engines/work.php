<?php
// SPDX-License-Identifier: MIT
// The PHP workload of tests/test_engines.py: fib is hot for a second.
function fib($n) { return $n < 2 ? $n : fib($n - 1) + fib($n - 2); }
$end = microtime(true) + 1.0;
$acc = 0;
while (microtime(true) < $end) { $acc += fib(18); }
echo $acc, "\n";
