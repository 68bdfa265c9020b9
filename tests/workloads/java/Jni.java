// Test workload for the HotSpot tests: Java calling C calling Java. main calls viaC, a native method
// (jni_callback.c) that calls back spin, which burns the CPU. main prints `ready` (the JVM has started) and
// runs until killed. Lines the tests look for are marked `// @line NAME`.
// Usage: java -Djava.library.path=DIR -cp DIR Jni
public class Jni {
    static long sink;

    static native void viaC(long rounds);

    static void spin(long rounds) {
        long x = 1;
        for (long i = 0; i < rounds; i++) { // @line spin
            x = x * 6364136223846793005L + 1442695040888963407L;
        }
        sink += x;
    }

    public static void main(String[] args) {
        System.loadLibrary("jni_callback");
        System.out.println("ready");
        System.out.flush();
        while (true) {
            viaC(50_000_000L); // @line main
        }
    }
}
