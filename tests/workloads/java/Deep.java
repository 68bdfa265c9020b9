// Benchmark workload: a 19-frame Java stack, main -> level x 17 -> burn, where burn spins in Java. Run by a
// link to java named java_bench (its thread name), without flags. Usage: java -cp DIR Deep SECONDS
public class Deep {
    static long sink;

    static long burn(long end) {
        long n = 0;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 20000; i++) {
                n = (n + i) % 1000003;
            }
        }
        return n;
    }

    static long level(int depth, long end) {
        if (depth == 0) {
            return burn(end);
        }
        return level(depth - 1, end) + 1;
    }

    public static void main(String[] args) {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 10;
        sink = level(16, System.nanoTime() + (long) (seconds * 1e9));
    }
}
