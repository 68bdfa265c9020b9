# Hand-written call-frame information for the CFI reader's tests: every directive the assembler turns into
# a DW_CFA_* opcode, in both .eh_frame and .debug_frame. The code is never run; only its CFI is read.
	.cfi_sections .eh_frame, .debug_frame
	.text

# rbp frame with push/pop pairs, remember/restore state around an early return.
	.globl	ops_frame
	.type	ops_frame, @function
ops_frame:
	.cfi_startproc
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	movq	%rsp, %rbp
	.cfi_def_cfa_register %rbp
	pushq	%rbx
	.cfi_offset %rbx, -24
	testq	%rdi, %rdi
	je	1f
	.cfi_remember_state
	popq	%rbx
	.cfi_restore %rbx
	popq	%rbp
	.cfi_def_cfa %rsp, 8
	.cfi_restore %rbp
	ret
1:
	.cfi_restore_state
	nop
	.cfi_same_value %rbp
	nop
	.cfi_offset %rbp, -16
	leave
	.cfi_def_cfa %rsp, 8
	ret
	.cfi_endproc
	.size	ops_frame, .-ops_frame

# CFA in another register, rbp saved in a register and by value, undefined return address.
	.globl	ops_registers
	.type	ops_registers, @function
ops_registers:
	.cfi_startproc
	movq	%rsp, %r12
	.cfi_def_cfa_register %r12
	movq	%rbp, %r13
	.cfi_register %rbp, %r13
	nop
	.cfi_val_offset %rbp, -32
	nop
	.cfi_undefined %rip
	nop
	.cfi_restore %rip
	.cfi_def_cfa %rsp, 8
	.cfi_restore %rbp
	ret
	.cfi_endproc
	.size	ops_registers, .-ops_registers

# Expressions: a non-PLT CFA expression, register expressions, GNU_args_size and a large frame that needs
# advance_loc2 and a multi-byte LEB128 offset.
	.globl	ops_expressions
	.type	ops_expressions, @function
ops_expressions:
	.cfi_startproc
	subq	$200000, %rsp
	.cfi_adjust_cfa_offset 200000
	.fill	300, 1, 0x90
	.cfi_escape 0x2e, 0x10
	# DW_CFA_def_cfa_expression: DW_OP_breg7 (rsp) 16; DW_OP_deref
	.cfi_escape 0x0f, 0x03, 0x77, 0x10, 0x06
	nop
	# DW_CFA_expression rbp: DW_OP_breg7 (rsp) 8
	.cfi_escape 0x10, 0x06, 0x02, 0x77, 0x08
	nop
	# DW_CFA_val_expression rbp: DW_OP_breg7 (rsp) 8
	.cfi_escape 0x16, 0x06, 0x02, 0x77, 0x08
	.fill	70000, 1, 0x90
	.cfi_def_cfa %rsp, 200008
	.cfi_same_value %rbp
	addq	$200000, %rsp
	.cfi_adjust_cfa_offset -200000
	ret
	.cfi_endproc
	.size	ops_expressions, .-ops_expressions

# The .plt expression, on a function that is not in .plt.
	.globl	ops_plt_pattern
	.type	ops_plt_pattern, @function
ops_plt_pattern:
	.cfi_startproc
	nop
	.cfi_escape 0x0f, 0x0b, 0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22
	nop
	ret
	.cfi_endproc
	.size	ops_plt_pattern, .-ops_plt_pattern

# A signal trampoline: a CIE with the "S" augmentation.
	.globl	ops_signal
	.type	ops_signal, @function
	nop
ops_signal:
	.cfi_startproc
	.cfi_signal_frame
	.cfi_escape 0x0f, 0x03, 0x77, 0xa0, 0x01
	movq	$15, %rax
	syscall
	.cfi_endproc
	.size	ops_signal, .-ops_signal

# A frame with a sleb-encoded (def_cfa_offset_sf / offset_extended_sf) rule via escapes, and a
# return-address column that is not 16.
	.globl	ops_sf
	.type	ops_sf, @function
ops_sf:
	.cfi_startproc
	nop
	# DW_CFA_def_cfa_sf rsp, 3 * -8 = -24 (nonsense but decodable)
	.cfi_escape 0x12, 0x07, 0x7d
	nop
	# DW_CFA_def_cfa_offset_sf -4 * -8 = 32
	.cfi_escape 0x13, 0x7c
	nop
	# DW_CFA_offset_extended_sf rbp, 2 * -8 = -16
	.cfi_escape 0x11, 0x06, 0x02
	nop
	# DW_CFA_GNU_negative_offset_extended rbp, 3 -> -(3 * -8) = 24
	.cfi_escape 0x2f, 0x06, 0x03
	ret
	.cfi_endproc
	.size	ops_sf, .-ops_sf

	.globl	ops_return_column
	.type	ops_return_column, @function
ops_return_column:
	.cfi_startproc
	.cfi_return_column %rax
	nop
	ret
	.cfi_endproc
	.size	ops_return_column, .-ops_return_column

	.section	.note.GNU-stack,"",@progbits
