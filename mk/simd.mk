# The SIMD backends: each is a folder kernels/<isa>/ whose backend.mk names
# the ISA's variables and calls simd_backend (below), which builds the
# shared sources for it. The Makefile includes those files after this one.
#
# Only a backend's objects get its ISA flags; everything else stays baseline,
# so the library runs on any CPU of the architecture and the registry
# (src/backends.c) picks a backend's tables only after its CPU check.
# `make SIMD=0` leaves every SIMD backend out (scalar only).

SIMD ?= 1
SIMD_X86 := $(if $(findstring x86_64,$(shell $(CC) -dumpmachine 2>/dev/null)),1,)
# A SIMDe build (an ISA's kernels emulated on another) needs SIMDe's headers
# (Debian: libsimde-dev).
SIMDE_HEADER ?= /usr/include/simde/x86/avx512.h
SIMD_SIMDE := $(if $(wildcard $(SIMDE_HEADER)),1,)

# The framework's builds for an ISA: -O3 (unless OPT was changed), so its
# own O(m), O(n) loops vectorize (GCC's -O2 vectorizer leaves loops that
# need a remainder or an alias check scalar); -ffp-contract=off, so they
# round exactly as the baseline build does (no FMA contraction).
SIMD_FW_OPT := $(if $(filter -O2,$(OPT)),-O3) -ffp-contract=off
# Extra flags for the SIMD micro-kernel tables alone (empty: OPT); the fuzz
# build sets -O0 (why: mk/fuzz.mk).
SIMD_UK_OPT ?=

# One compile of a shared source for an ISA: SIMD_FLAGS, set per object.
define simd_compile
@mkdir -p $(dir $@)
$(CC) $(CFLAGS) $(SIMD_FLAGS) -MMD -MP -c $< -o $@
endef

simd_upper = $(shell echo '$(1)' | tr a-z- A-Z_)

# $(1) ISA, $(2) precision (f32, f64), $(3) the objects' infix ("" native,
# "-simde" SIMDe), $(4) the flags: the micro-kernel table (ukernels-*.o)
# and its update_read (update-read-*.o), from kernels/simd.
define simd_tables
$(BUILD)/obj/kernels/$(1)/ukernels$(3)-$(2).o: kernels/simd/ukernels.c
	$$(simd_compile)
$(BUILD)/obj/kernels/$(1)/update-read$(3)-$(2).o: kernels/simd/update-read-unit.c
	$$(simd_compile)
$(BUILD)/obj/kernels/$(1)/ukernels$(3)-$(2).o $(BUILD)/obj/kernels/$(1)/update-read$(3)-$(2).o: \
  SIMD_FLAGS := -DFALCON_VEC_H='"../$(1)/$($(1)_VEC)"' $(if $(filter f32,$(2)),-DFALCON_REAL_F32=1) $(4)
EXTRA_LIB_OBJ += $(BUILD)/obj/kernels/$(1)/ukernels$(3)-$(2).o $(BUILD)/obj/kernels/$(1)/update-read$(3)-$(2).o
endef

# $(1) ISA, $(2) precision: the framework's drivers falcon_fw_$(1)_$(2)
# (framework-*.o, the recurrent one in recurrent-*.o), from kernels/framework.
define simd_framework
$(BUILD)/obj/kernels/$(1)/framework-$(2).o: kernels/framework/framework-$(2).c
	$$(simd_compile)
$(BUILD)/obj/kernels/$(1)/recurrent-$(2).o: kernels/framework/recurrent-$(2).c
	$$(simd_compile)
$(BUILD)/obj/kernels/$(1)/framework-$(2).o $(BUILD)/obj/kernels/$(1)/recurrent-$(2).o: \
  SIMD_FLAGS := -DFALCON_FW_ISA=$(1) $($(1)_FLAGS) $(SIMD_FW_OPT)
EXTRA_LIB_OBJ += $(BUILD)/obj/kernels/$(1)/framework-$(2).o $(BUILD)/obj/kernels/$(1)/recurrent-$(2).o
endef

# A SIMD backend, from its backend.mk's variables ($(1) its name, the folder
# kernels/$(1)), which calls $(call simd_backend,$(1)) after them:
#   $(1)_VEC    its vector header in that folder (VNAME, the tiles, the
#               intrinsics: kernels/avx2/vec-avx2.h lists what it defines)
#   $(1)_FLAGS  the compiler flags of its ISA
#   $(1)_SIMDE  where it has a SIMDe build (the header under FALCON_VEC_SIMDE,
#               the tables falcon_uk_$(1)emu_*), that build's flags
# For each precision: its tables falcon_uk_$(1)_* (and the SIMDe build's)
# and the framework's drivers; -DFALCON_HAVE_<ISA> (and _SIMDE) let its
# registry row refer to them. x86-64 only; SIMD=0 leaves it out.
simd_backend = $(if $(filter 11,$(SIMD)$(SIMD_X86)),$(eval $(call simd_backend_rules,$(1))))
simd_has_simde = $(if $(SIMD_SIMDE),$($(1)_SIMDE))

define simd_backend_rules
$(foreach p,f32 f64,$(eval $(call simd_tables,$(1),$(p),,$($(1)_FLAGS) $(SIMD_UK_OPT))))
$(foreach p,f32 f64,$(eval $(call simd_framework,$(1),$(p))))
$(if $(call simd_has_simde,$(1)),$(foreach p,f32 f64,$(eval $(call simd_tables,$(1),$(p),-simde,-DFALCON_VEC_SIMDE=1 $($(1)_SIMDE)))))
CFLAGS += -DFALCON_HAVE_$(call simd_upper,$(1)) $(if $(call simd_has_simde,$(1)),-DFALCON_HAVE_$(call simd_upper,$(1))_SIMDE)
# The registry is rebuilt when the row's flags change.
$(BUILD)/obj/src/backends.o: kernels/$(1)/backend.mk
endef
