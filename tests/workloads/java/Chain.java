// Test workload for the HotSpot tests: main prints `ready` (the JVM has started), then calls a, a b, b c,
// which burns the CPU until the process has used SECONDS of CPU time (all its threads), then prints
// `cpu_seconds=S`. Lines the tests look for are marked `// @line NAME`. Usage: java -cp DIR Chain SECONDS
import java.lang.management.ManagementFactory;

public class Chain {
    static long sink;

    static double cpuSeconds() {
        com.sun.management.OperatingSystemMXBean os =
            (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        return os.getProcessCpuTime() / 1e9;
    }

    static void c(double end) { // @line c_first
        long x = 1;
        while (true) {
            for (int i = 0; i < 2_000_000; i++) {
                x = x * 6364136223846793005L + 1442695040888963407L;
            }
            sink += x;
            if (cpuSeconds() >= end) {
                return;
            }
        }
    } // @line c_last

    static void b(double end) {
        c(end); // @line b
        sink++;
    }

    static void a(double end) {
        b(end); // @line a
        sink++;
    }

    public static void main(String[] args) {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 5;
        System.out.println("ready");
        System.out.flush();
        a(seconds); // @line main
        System.out.printf("cpu_seconds=%.3f%n", cpuSeconds());
    }
}
