// The native half of tests/workloads/java/Jni.java: Jni.viaC calls back Jni.spin through JNI, from a C
// function the compiler keeps as a frame of its own.
#include <jni.h>

__attribute__((noinline)) static void call_spin(JNIEnv *env, jclass cls, jlong rounds)
{
  jmethodID spin = (*env)->GetStaticMethodID(env, cls, "spin", "(J)V");
  if (spin != NULL)
    (*env)->CallStaticVoidMethod(env, cls, spin, rounds);
  __asm__ volatile("" ::: "memory"); // not a tail call: this frame stays on the stack
}

JNIEXPORT void JNICALL Java_Jni_viaC(JNIEnv *env, jclass cls, jlong rounds)
{
  call_spin(env, cls, rounds);
  __asm__ volatile("" ::: "memory");
}
