// Test workload for the HotSpot tests: c calls mix, mix calls step, each small enough that C1 and C2 inline
// them into c; step calls leaf, which the tests keep from being inlined
// (-XX:CompileCommand=dontinline,Inline::leaf), so that the code of c has calls inside inlined methods.
// main prints `ready` (the JVM has started), then runs c until killed. Lines the tests look for are marked
// `// @line NAME`. Usage: java -cp DIR Inline
public class Inline {
    static long sink;

    static long leaf(long x) {
        return x * 6364136223846793005L;
    }

    static long step(long x) {
        return leaf(x) + 1442695040888963407L; // @line step
    }

    static long mix(long x) {
        return step(x) ^ (x >>> 7); // @line mix
    }

    static void c(long n) {
        long x = 1;
        for (long i = 0; i < n; i++) {
            x = mix(x); // @line c
        }
        sink += x;
    }

    public static void main(String[] args) {
        System.out.println("ready");
        System.out.flush();
        while (true) {
            c(100_000_000L); // @line main
        }
    }
}
