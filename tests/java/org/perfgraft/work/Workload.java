// SPDX-License-Identifier: MIT
package org.perfgraft.work;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Collectors;

/**
 * A small real Java workload for tests/test_java.py and bench/bench-java.sh:
 * hot methods, small ones C2 inlines into them, strings, arrays, sorting
 * with comparators, a stream with lambdas and an exception path taken often
 * enough to be compiled.
 *
 *     java -cp CLASSES org.perfgraft.work.Workload MILLIS [ROUNDS]
 *
 * Prints "pid N" first, then runs rounds of every phase until MILLIS have
 * passed (or, with ROUNDS, exactly that many rounds, for timing), and ends
 * with "rounds N" and "checksum X"; with ROUNDS also "steady_ms T", the
 * time of the rounds after the first third (the warm-up).  The tests find line numbers by the
 * "LINE:" markers below, never by fixed numbers: keep each marker on the
 * line it names.
 */
public final class Workload {
    static final class Item {
        final String name;
        final int weight;
        final long stamp;

        Item(String name, int weight, long stamp) {
            this.name = name;
            this.weight = weight;
            this.stamp = stamp;
        }
    }

    static int sink;

    /** A tiny mixer: C2 inlines it into hashLoop. */
    static int mix(int x) {
        x ^= x >>> 16;             // LINE:mix-1
        x *= 0x7feb352d;           // LINE:mix-2
        x ^= x >>> 15;             // LINE:mix-3
        x *= 0x846ca68b;           // LINE:mix-4
        return x ^ (x >>> 16);     // LINE:mix-5
    }

    /** Hot loop over an array, mix() inlined. */
    static int hashLoop(int[] a, int seed) {
        int h = seed;
        for (int r = 0; r < 8; r++) {
            for (int i = 0; i < a.length; i++) {
                h += mix(a[i] + h);    // LINE:hashLoop-call-mix
            }
        }
        return h;
    }

    /** Builds strings and hashes them. */
    static int stringWork(int n, int seed) {
        int h = 0;
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < n; i++) {
            sb.setLength(0);
            sb.append("item-").append(i * 31 + seed).append('/').append(Integer.toHexString(i ^ seed));
            String s = sb.toString();
            h = h * 131 + s.hashCode() + s.indexOf('/');
        }
        return h;
    }

    static Item[] makeItems(int n, int seed) {
        Item[] items = new Item[n];
        int x = seed;
        for (int i = 0; i < n; i++) {
            x = x * 1103515245 + 12345;
            items[i] = new Item("n" + ((x >>> 8) & 0xffff), (x >>> 4) & 1023, x);
        }
        return items;
    }

    static final Comparator<Item> BY_WEIGHT_THEN_NAME =
        Comparator.comparingInt((Item it) -> it.weight).thenComparing(it -> it.name);

    /** Sorts objects with comparators (Arrays.sort and Collections.sort). */
    static long sortWork(int n, int seed) {
        Item[] items = makeItems(n, seed);
        Arrays.sort(items, BY_WEIGHT_THEN_NAME);
        List<Item> list = new ArrayList<>(Arrays.asList(items));
        Collections.sort(list, (p, q) -> Long.compare(p.stamp, q.stamp));
        int[] ints = new int[n * 4];
        for (int i = 0; i < ints.length; i++) {
            ints[i] = mix(i + seed);
        }
        Arrays.sort(ints);
        return items[0].weight + list.get(n / 2).stamp + ints[ints.length / 3];
    }

    /** A stream pipeline with lambdas. */
    static long streamWork(int n, int seed) {
        List<Integer> xs = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            xs.add((i * 7919 + seed) % 10007);
        }
        long s = xs.stream().filter(v -> (v & 3) != 0).mapToLong(v -> (long) v * v % 1009).sum();
        String joined = xs.stream().limit(64).map(v -> Integer.toString(v, 36))
            .collect(Collectors.joining(","));
        return s + joined.length();
    }

    /** An exception thrown and caught often enough to be compiled. */
    static int parseOrDefault(String s) {
        try {
            return Integer.parseInt(s);
        } catch (NumberFormatException e) {
            return -1;                 // LINE:parse-catch
        }
    }

    static int exceptionWork(int n, int seed) {
        int sum = 0;
        for (int i = 0; i < n; i++) {
            String s = ((i + seed) % 5 == 0) ? "x" + i : Integer.toString(i);
            sum += parseOrDefault(s);
        }
        return sum;
    }

    static long round(int[] data, int r) {
        long c = hashLoop(data, r);
        c += stringWork(2000, r);
        c += sortWork(3000, r);
        c += streamWork(4000, r);
        c += exceptionWork(400, r);
        return c;
    }

    public static void main(String[] args) {
        long millis = args.length > 0 ? Long.parseLong(args[0]) : 3000;
        long rounds = args.length > 1 ? Long.parseLong(args[1]) : -1;
        System.out.println("pid " + ProcessHandle.current().pid());
        System.out.flush();
        int[] data = new int[1 << 14];
        for (int i = 0; i < data.length; i++) {
            data[i] = i * 2654435761L > 0 ? i * 40503 : i;
        }
        long end = System.nanoTime() + millis * 1_000_000L;
        long checksum = 0;
        long done = 0;
        long warm = rounds / 3;
        long steady = 0;
        while (rounds >= 0 ? done < rounds : System.nanoTime() < end) {
            if (done == warm) {
                steady = System.nanoTime();
            }
            checksum += round(data, (int) done);
            done++;
        }
        sink = (int) checksum;
        System.out.println("rounds " + done);
        System.out.println("checksum " + Long.toHexString(checksum));
        if (rounds > 0) {
            System.out.printf("steady_ms %.1f%n", (System.nanoTime() - steady) / 1e6);
        }
    }
}
