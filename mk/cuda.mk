# The CUDA backend (kernels/cuda). Built when nvcc exists; otherwise this file
# does nothing and src/stubs/cuda.c stays in the library.
#   make                 library + CLI with the cuda backend
#   make cuda-report     registers, spills, stack and shared memory per kernel
#   make cuda-test       the CPU checks: kernels emulated on the CPU against the
#                        scalar fp64 backend, and the "no GPU here" behaviour
#                        (on a machine with a GPU: the GPU check instead)
# kernels/cuda/device-check.sh is the one-command check for a GPU machine.
NVCC ?= $(shell command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)

ifneq ($(wildcard $(NVCC)),)
CUDA_HOME   ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_LIBDIR ?= $(firstword $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/lib) $(CUDA_HOME)/lib64)
CUDA_ARCH   ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
               -gencode arch=compute_90,code=compute_90
NVCCFLAGS   ?= -O3 -std=c++17 $(CUDA_ARCH) -Xptxas -v --Werror all-warnings \
               -Xcompiler -Wall,-Wextra,-Werror -Iinclude

CUDA_OBJ := $(BUILD)/obj/kernels/cuda/cuda_host.o $(BUILD)/obj/kernels/cuda/cuda_kernels.o
LIB_SRC  := $(filter-out src/stubs/cuda.c,$(LIB_SRC))
EXTRA_LIB_OBJ += $(CUDA_OBJ)
# The CUDA runtime is linked statically: the binaries start (and report the
# cuda backend unavailable) on machines with no GPU and no driver.
LDFLAGS += -L$(CUDA_LIBDIR)
LDLIBS  += -lcudart_static -ldl -lrt -lpthread -lstdc++
PC_LIBS_PRIVATE += -L$(CUDA_LIBDIR) -lcudart_static -ldl -lrt -lpthread -lstdc++

# ptxas -v output (registers, spills) is kept beside each object for cuda-report.
$(BUILD)/obj/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -Xcompiler -fPIC -MMD -MP -MF $(@:.o=.d) -MT $@ -c $< -o $@ 2> $(@:.o=.ptxas.log) \
	  || { cat $(@:.o=.ptxas.log); rm -f $@; exit 1; }

.PHONY: cuda-report cuda-test
cuda-report: $(BUILD)/obj/kernels/cuda/cuda_kernels.o
	@printf '%-20s %-6s %5s %6s %9s %9s %6s\n' kernel arch regs stack spill-st spill-ld cmem0
	@awk '/Compiling entry function/ { k = $$0; sub(/^[^'"'"']*'"'"'/, "", k); sub(/'"'"'.*/, "", k); \
	       if (match(k, /fc_k_[a-z_]*/)) k = substr(k, RSTART, RLENGTH); \
	       a = $$0; sub(/.*for '"'"'/, "", a); sub(/'"'"'.*/, "", a); st = ss = sl = "-" } \
	     /bytes stack frame/ { st = $$1; ss = $$5; sl = $$9 } \
	     /Used [0-9]+ registers/ { r = $$0; sub(/.*Used /, "", r); sub(/ registers.*/, "", r); \
	       c = "-"; if (match($$0, /[0-9]+ bytes cmem\[0\]/)) { c = substr($$0, RSTART, RLENGTH); sub(/ .*/, "", c) } \
	       printf "%-20s %-6s %5s %6s %9s %9s %6s\n", k, a, r, st, ss, sl, c }' \
	  $(BUILD)/obj/kernels/cuda/cuda_kernels.ptxas.log

# The check program: CPU emulation of the kernels, the no-GPU behaviour, and
# on a GPU machine the device check and benchmark.
# Its accuracy checks run the gate's cases and thresholds (the gate's engine
# objects, named directly: GATE_OBJ is defined after this file is included).
CUDA_CHECK_OBJ := $(BUILD)/obj/verify/cuda/cuda-check.o $(BUILD)/obj/verify/cuda/cuda-check-gate.o \
                  $(BUILD)/obj/verify/cuda/cuda-check-grad.o \
                  $(BUILD)/obj/verify/cuda/cuda_emulate.o $(BUILD)/obj/gate/gate.o \
                  $(BUILD)/obj/gate/gate-cases.o $(BUILD)/obj/gate/gate-thresholds.o \
                  $(BUILD)/obj/gate/grad-gate.o $(BUILD)/obj/gate/grad-cases.o
$(BUILD)/obj/verify/cuda/cuda-check-gate.o $(BUILD)/obj/verify/cuda/cuda-check-grad.o: CFLAGS += $(GATE_INC)
$(BUILD)/cuda-check: $(CUDA_CHECK_OBJ) $(LIB_LINK)
	$(CC) $(LDFLAGS) $(EXE_LDFLAGS) -o $@ $(CUDA_CHECK_OBJ) $(LIB_LINK) $(LDLIBS)

cuda-test: $(BUILD)/cuda-check
	$(BUILD)/cuda-check emulate
	$(BUILD)/cuda-check auto

-include $(CUDA_CHECK_OBJ:.o=.d)
endif
