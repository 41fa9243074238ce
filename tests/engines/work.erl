%% SPDX-License-Identifier: MIT
%% The Erlang workload of tests/test_engines.py: fib/1 is hot, loop/2
%% calls it, main/0 runs it and halts.  Lines matter: the test reads each
%% function's line range from this file.
-module(work).
-export([main/0]).

fib(0) -> 0;
fib(1) -> 1;
fib(N) -> fib(N - 1) + fib(N - 2).

loop(0, Acc) -> Acc;
loop(N, Acc) -> loop(N - 1, Acc + fib(25)).

main() ->
    R = loop(60, 0),
    io:format("~p~n", [R]),
    halt().
