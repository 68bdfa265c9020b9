/* Links the hand-written CFI of cfi_ops.s into an executable; the functions are never called. */
extern void ops_frame(long), ops_registers(void), ops_expressions(void), ops_plt_pattern(void);
int main(int argc, char **argv) { (void)argv; if (argc > 100) { ops_frame(0); ops_registers(); ops_expressions(); ops_plt_pattern(); } return 0; }
