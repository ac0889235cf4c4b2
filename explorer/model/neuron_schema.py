"""The published Neuron Explorer Parquet schema (7.4.0, `PROFILE_SCHEMA.md`) as data: every table's fields
with type, required flag and ns unit, and the rules that recognise a table by file stem or by columns.
Reading and storing the tables lives in neuron_parquet.py / neuron_device.py; nothing is computed here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

import pyarrow as pa

SCHEMA_VERSION = "7.4.0"  # the version these field lists were written from
SCHEMA_MAJOR = 7
LEGACY = "legacy"  # recognition rows for column spellings of exports older than the published schema

# What the system half of an export holds; every other table belongs to a device profile.
SYSTEM_TABLES = frozenset({"SystemProfileEvents", "SystemProfileHbmUsage", "SystemProfileMetadata", "CpuUsage",
                           "HostMemUsage", "Warning", "DeviceProfileList"})
EXPORT_TABLES = frozenset({"SchemaFields"})  # describes the export itself, read with whichever half it sits in

# Per table, its fields as `name:type[@ns][!]`: type i64/i32 integer, f32/f64 number, str, bool, [i64]/[str]
# list; `@ns` an integer time or duration in nanoseconds; `!` required. Field order as published.
_FIELDS: dict[str, str] = {
    "ActiveTime": "start_ts:i64@ns! end_ts:i64@ns! engine:str! pcore_idx:i64! duration_ns:i64@ns!",
    "AssemblyInstruction": "instruction_id:i64! compiler_opcode:str! compiler_operands:str! compiler_pc:i64!",
    "BirInstruction": (
        "id:i64! raw_bir_id:i64! raw_penguin_id:i64! raw_hlo_id:i64! raw_framework_id:i64! bir_name:str! "
        "modular_flow_invocation_idx:i64! pcore_idx:i64 start_ts:i64@ns! end_ts:i64@ns! "
        "time_intervals:str! element_count_per_interval:[i64]! "
        "transpose_element_count_per_interval:[i64]! hbm_transfer_size_per_interval:[i64]! "
        "hbm_read_bytes:i64! hbm_write_bytes:i64! sbuf_read_bytes:i64 sbuf_write_bytes:i64 "
        "load_weight_bytes:i64"
    ),
    "CcInstruction": (
        "start_ts:i64@ns! end_ts:i64@ns! duration_ns:i64@ns! core_idx:i64! description:str! "
        "trigger_engine:str trigger_start_ts:i64@ns"
    ),
    "CcOp": (
        "start_ts:i64@ns! end_ts:i64@ns! duration_ns:i64@ns! operation:str! algorithm:str! "
        "num_elements:i64! dtype:str! op_id:i64! stream_id:i64! stream_index:i64! trigger_engine:str! "
        "input_size:i64 output_size:i64 algorithm_bandwidth:f32 bus_bandwidth:f32 trigger_start_ts:i64@ns "
        "cc_trigger_start_delay:i64@ns replica_group_id:i64 replica_group:str"
    ),
    "CcStream": "stream_id:i64! stream_index:i64! cc_core_ids:str!",
    "CoreBarriers": (
        "start_ts:i64@ns! end_ts:i64@ns! duration_ns:i64@ns! engine_name:str! id:i64! semaphore:i64! "
        "compiler_pc:i64! compiler_opcode:str! compiler_operands:str! pcore_idx:i64"
    ),
    "CpuUsage": (
        "timestamp:i64@ns! util_percent:f32! cpu_id:str! instance_id:str! ultraserver_id:i64 "
        "ultraserver_instance_index:i64"
    ),
    "DeviceProfileList": "device_profile_name:str! instance_id:str! process_id:i64! nc_id:i64! session_id:i64 model_id:i64",
    "DmaPacket": (
        "start_ts:i64@ns! end_ts:i64@ns! duration_ns:i64@ns! pcore_idx:i64 id:i64! packet_idx:i32! "
        "packet_aggregation_id:i64! engine_idx:i64 read_bytes:i64! write_bytes:i64! transfer_bytes:i64! "
        "throughput:f32! queue_type:str! variable:str queue_name:str queue_idx:i64 crc:i64!"
    ),
    "DmaPacketAggregated": (
        "start_ts:i64@ns! end_ts:i64@ns! duration_ns:i64@ns! id:i64! pcore_idx:i64 block_id:i32! "
        "queue_idx:i64! queue_name:str! queue_type:str op:str! variable:str! read_bytes:i64! "
        "write_bytes:i64! transfer_bytes:i64! throughput:f32! source:str! dest:str! semaphore_id:str! "
        "modular_flow_function:str read_sbuf_partitions:str! read_num_sbuf_partitions:i32! "
        "read_shape:str! read_offset:str! read_steps:str! write_sbuf_partitions:str! "
        "write_num_sbuf_partitions:i32! write_shape:str! write_offset:str! write_steps:str! "
        "is_transpose_mode:bool transpose_element_size:str transpose_shape:str transpose_from_shape:str "
        "transpose_to_shape:str transpose_unroll_factor:str trigger:i64 completion:i64"
    ),
    "DmaQueuesInfo": "name:str! type:str! pcore_idx:i64! idx:i64! engine_idx:i64! axi_port:i64! dram_channel:i64!",
    "DmaUsage": "timestamp:i64@ns! current_throughput:f32! total_transfer_bytes:i64! pcore_idx:i64",
    "DmaUsageSummary": (
        "timestamp:i64@ns! pcore_idx:i64! sum_current_throughput:f64! sum_total_transfer_bytes:i64! "
        "max_total_transfer_bytes:i64! count:i64! bucket_resolution_ns:i64@ns!"
    ),
    "Error": (
        "description:str! error_type_id:i32! metadata:str metadata_hex:str pcore_idx:i64 "
        "timestamp:i64@ns! type:str!"
    ),
    "ExecutionInfo": (
        "execution_index:i32! neff_name:str execution_start_ts:i64@ns execution_end_ts:i64@ns "
        "num_subgraphs:i32 row_count:i64"
    ),
    "Flow": "in_id:i64! out_id:i64! in_table:str! out_table:str! dependency_type:str gap_time:i64@ns",
    "FrameworkInstruction": (
        "id:i64! raw_bir_id:i64! raw_penguin_id:i64! raw_hlo_id:i64! raw_framework_id:i64! "
        "modular_flow_invocation_idx:i64 framework_name:str start_ts:i64@ns! end_ts:i64@ns! "
        "time_intervals:str! element_count_per_interval:[i64]! "
        "transpose_element_count_per_interval:[i64]! hbm_transfer_size_per_interval:[i64]! "
        "hbm_read_bytes:i64! hbm_write_bytes:i64! sbuf_read_bytes:i64 sbuf_write_bytes:i64 "
        "load_weight_bytes:i64 tensor_engine_instruction_count:i64 scalar_engine_instruction_count:i64 "
        "sync_engine_instruction_count:i64 gpsimd_engine_instruction_count:i64 "
        "vector_engine_instruction_count:i64"
    ),
    "FrameworkNode": (
        "node_name:str! children_names:str! parent_name:str! children_ids:str! start_ts:i64@ns! "
        "end_ts:i64@ns! time_intervals:str! element_count_per_interval:str "
        "transpose_element_count_per_interval:str hbm_transfer_size_per_interval:str hfu:f32 mfu:f32 "
        "hfu_per_interval:str mfu_per_interval:str mbu_per_interval:str hbm_read_bytes:i64 "
        "hbm_write_bytes:i64 sbuf_read_bytes:i64 sbuf_write_bytes:i64 tensor_engine_instruction_count:i64 "
        "scalar_engine_instruction_count:i64 sync_engine_instruction_count:i64 "
        "gpsimd_engine_instruction_count:i64 vector_engine_instruction_count:i64 total_time_tensor:str "
        "total_time_scalar:str total_time_sync:str total_time_gpsimd:str total_time_vector:str "
        "load_weight_bytes:i64 total_channels_scalar:i64 total_channels_vector:i64"
    ),
    "HbmUsage": "timestamp:i64@ns! current_throughput:f32! total_transfer_bytes:i64! pcore_idx:i64",
    "HbmUsageSummaryByType": "neuron_device_idx:i64! neuroncore_idx:i64! usage_type:str! usage_bytes:i64!",
    "HloInstruction": (
        "id:i64! raw_bir_id:i64! raw_penguin_id:i64! raw_hlo_id:i64! raw_framework_id:i64! hlo_name:str! "
        "modular_flow_invocation_idx:i64 start_ts:i64@ns! end_ts:i64@ns! time_intervals:str! "
        "element_count_per_interval:[i64]! transpose_element_count_per_interval:[i64]! "
        "hbm_transfer_size_per_interval:[i64]! hbm_read_bytes:i64! hbm_write_bytes:i64! "
        "sbuf_read_bytes:i64 sbuf_write_bytes:i64 load_weight_bytes:i64"
    ),
    "HostMemUsage": (
        "timestamp:i64@ns! used_bytes:i64! used_percent:f32! instance_id:str! ultraserver_id:i64 "
        "ultraserver_instance_index:i64"
    ),
    "Instruction": (
        "start_ts:i64@ns! end_ts:i64@ns! duration_ns:i64@ns! engine:str! timeline_track:str pcore_idx:i64 "
        "opcode:str! operands:str! compiler_opcode:str compiler_operands:str id:i64! pc:i64! "
        "compiler_pc:i64 penguin_id:str raw_penguin_id:i64 bir_id:str! raw_bir_id:i64 "
        "bir_instruction_name:str kernel_instruction_name:str crc_in:i64 crc_out:i64 "
        "evt_wait_time_ns:i64@ns hlo_attrs:str hlo_name:str raw_hlo_id:i64 raw_framework_id:i64 layer:str "
        "stack_frame_ids:str nki_source_location:str bir_debug_info_source_location:str "
        "dma_trigger_start_ts:i64 dma_trigger_end_ts:i64 dma_wait_time_ns:i64@ns instruction_chain:str "
        "hbm_read_bytes:i64 hbm_write_bytes:i64 sbuf_read_bytes:i64 sbuf_write_bytes:i64 "
        "spill_save_bytes:i64 spill_reload_bytes:i64 psum_read_bytes:i64 psum_write_bytes:i64 "
        "psum_read_sbuf_write_bytes:i64 input_queue_bytes:i64 output_queue_bytes:i64 "
        "weight_queue_bytes:i64 performance_mode:str tensor_instruction_type:str tensor_elements:i64 "
        "raw_flops:i64 adjusted_flops:i64 tensor_elements_transpose:i64 flops_transpose:i64 "
        "adjusted_flops_transpose:i64 scalar_activation_fn:str"
    ),
    "KernelInstructions": (
        "kernel_instruction_name:str! stack_frame_id:i64 stack_frame_depth:i64 iteration_variables_id:i64 "
        "iteration_variable_depth:i64 pcore_idx:i64 file_path:str line_number:i64"
    ),
    "KernelIterationVariables": (
        "iteration_variable_id:i64! variable_name:str variable_value:i64 parent_iteration_variable_id:i64 "
        "pcore_idx:i64 file_path:str line_number:i64"
    ),
    "KernelStackFrames": (
        "stack_frame_id:i64! fully_qualified_function_name:str parent_stack_frame_id:i64 pcore_idx:i64 "
        "file_path:str line_number:i64"
    ),
    "Metadata": (
        "profile_schema_version:str! ntff_version:i32! num_physical_cores:i32! vnc_enabled:bool! "
        "first_hw_timestamp:i64@ns! last_hw_timestamp:i64@ns! first_ts:str! last_ts:str! "
        "dma_ddr_bandwidth:f32! num_dma_engines_per_neuroncore:i32! hbm_ddr_bandwidth:f32! "
        "tensor_engine_num_rows:i64! tensor_engine_num_cols:i64! tensor_engine_clock_freq:f32! "
        "vector_engine_clock_freq:f32! vector_engine_num_channels:i64! scalar_engine_clock_freq:f32! "
        "scalar_engine_num_channels:i64! gpsimd_engine_clock_freq:f32! gpsimd_engine_num_channels:i64! "
        "neuroncore_clock_freq:f32! ticks_per_nanosec:i64! instance_type:str runtime_version:str "
        "collectives_version:str driver_version:str explorer_version:str compiler_version:str "
        "neuroncore_idx:i64 neuron_device_idx:i64 ultraserver_id:i64 ultraserver_type:str "
        "ultraserver_size:i32 ultraserver_instance_index:i32 s3_bucket_path:str profile_name:str "
        "explorer_build_time:str is_simulation:bool"
    ),
    "NeffHeader": (
        "network_name:str uuid:str hash:str enabled_features:str header_size:i64 data_size:i64 "
        "major_version:i64 minor_version:i64 package_version:str build_version:str "
        "cc_participant_count:i64 neuroncore_count:i64 logical_neuroncore_count:i64 "
        "pcore_count_per_lnc:i64"
    ),
    "OpcodeSummary": (
        "engine:str! opcode:str! instruction_count:i64! instruction_time_ns:i64@ns! "
        "active_time_ns:i64@ns! active_time_percent:f32!"
    ),
    "PendingDma": "timestamp:i64@ns! value:i32! pcore_idx:i64",
    "PenguinInstruction": (
        "id:i64! raw_bir_id:i64! raw_penguin_id:i64! raw_hlo_id:i64! raw_framework_id:i64! "
        "penguin_name:str! modular_flow_invocation_idx:i64 start_ts:i64@ns! end_ts:i64@ns! "
        "time_intervals:str! element_count_per_interval:[i64]! "
        "transpose_element_count_per_interval:[i64]! hbm_transfer_size_per_interval:[i64]! "
        "hbm_read_bytes:i64! hbm_write_bytes:i64! sbuf_read_bytes:i64 sbuf_write_bytes:i64 "
        "load_weight_bytes:i64"
    ),
    "PsumUsage": (
        "timestamp:i64@ns! avg_util_percent:f32 bank_0_util_percent:f32 bank_1_util_percent:f32 "
        "bank_2_util_percent:f32 bank_3_util_percent:f32 bank_4_util_percent:f32 bank_5_util_percent:f32 "
        "bank_6_util_percent:f32 bank_7_util_percent:f32 pcore_idx:i64"
    ),
    "SbufAllocation": (
        "start_ts:i64@ns! end_ts:i64@ns! start_address:i64! end_address:i64! partition:i64! "
        "op_source_type:str opcode:str operands:str queue_name:str block_id:i64 tensor_name:str "
        "hlo_name:str pcore_idx:i64"
    ),
    "SbufUsage": (
        "timestamp:i64@ns! avg_util_percent:f32 partition_0_util_percent:f32 "
        "partition_32_util_percent:f32 partition_64_util_percent:f32 partition_96_util_percent:f32 "
        "pcore_idx:i64"
    ),
    "SchemaFields": (
        "table_name:str! table_description:str! field_name:str! field_description:str! field_example:str "
        "field_type:str! field_required:bool! field_format:str field_unit:str field_minimum:f32 "
        "field_maximum:f32 field_enum_values:str"
    ),
    "SemaphoreUpdate": (
        "timestamp:i64@ns! id:str! value:i32! update_source:str double_set_or_clear:bool update_mode:i32 "
        "update_operation_type:str update_trigger_timing:str pcore_idx:i64"
    ),
    "StackFrame": "id:str! file_location_id:i32! parent_frame_id:str!",
    "StackFrameFileLocation": "id:str! file_name_id:i32! function_name_id:i32! line_number:i32!",
    "StackFrameFileName": "id:str! name:str!",
    "StackFrameFunctionName": "id:str! name:str!",
    "Summary": (
        "total_time:f32 neuroncore_cycle_count:i64 model_flops:i64 hardware_flops:i64 transpose_flops:i64 "
        "adjusted_hardware_flops:i64 adjusted_transpose_flops:i64 mm_arithmetic_intensity:f32 "
        "peak_flops_bandwidth_ratio:f32 trace_count:i64 event_count:i64 total_row_count:i64 "
        "dma_active_cycles:i64 dma_active_time:f32 dma_active_time_percent:f32 static_dma_active_time:f32 "
        "dynamic_dma_active_time_percent:f32 static_dma_active_time_percent:f32 "
        "dma_transfer_average_bytes:f32 dma_packet_time:f32 dma_transfer_time:f32 dma_transfer_count:i64 "
        "dma_transfer_total_bytes:i64 dma_queue_count:i64 inputs_and_weights_size_bytes:i64 "
        "inputs_outputs_weights_size_bytes:i64 weight_size_bytes:i64 static_dma_packet_count:i64 "
        "static_dma_size:i64 dynamic_dma_packet_percent:f32 static_dma_packet_percent:f32 "
        "dynamic_dma_size_percent:f32 static_dma_size_percent:f32 mbu_estimated_percent:f32 "
        "mbu_min_read_util_percent:f32 hbm_write_bytes:i64 hbm_read_bytes:i64 sbuf_write_bytes:i64 "
        "sbuf_read_bytes:i64 spill_save_bytes:i64 spill_reload_bytes:i64 psum_write_bytes:i64 "
        "psum_read_bytes:i64 psum_read_sbuf_write_count:i64 psum_read_sbuf_write_bytes:i64 "
        "input_queue_bytes:i64 output_queue_bytes:i64 weight_queue_bytes:i64 "
        "software_dynamic_dma_active_time:f32 software_dynamic_dma_active_time_percent:f32 "
        "software_dynamic_dma_packet_count:i64 software_dynamic_dma_size:i64 "
        "software_dynamic_dma_packet_percent:f32 software_dynamic_dma_size_percent:f32 "
        "hardware_dynamic_dma_active_time:f32 hardware_dynamic_dma_active_time_percent:f32 "
        "hardware_dynamic_dma_packet_count:i64 hardware_dynamic_dma_size:i64 "
        "hardware_dynamic_dma_packet_percent:f32 hardware_dynamic_dma_size_percent:f32 "
        "tensor_engine_instruction_time:f32 tensor_engine_active_time:f32 "
        "tensor_engine_active_time_percent:f32 tensor_engine_instruction_count:i64 "
        "matmul_instruction_count:i64 mfu_estimated_percent:f32 mfu_max_achievable_estimated_percent:f32 "
        "mfu_hlo_estimated_percent:f32 mfu_hlo_max_achievable_estimated_percent:f32 "
        "mfu_inst_estimated_percent:f32 mfu_inst_max_achievable_estimated_percent:f32 "
        "hfu_estimated_percent:f32 vector_engine_instruction_time:f32 vector_engine_active_time:f32 "
        "vector_engine_active_time_percent:f32 vector_engine_instruction_count:i64 "
        "scalar_engine_instruction_time:f32 scalar_engine_active_time:f32 "
        "scalar_engine_active_time_percent:f32 scalar_engine_instruction_count:i64 "
        "activate_instruction_time:f32 activate_instruction_count:i64 sync_engine_instruction_time:f32 "
        "sync_engine_active_time:f32 sync_engine_active_time_percent:f32 "
        "sync_engine_instruction_count:i64 gpsimd_engine_instruction_time:f32 "
        "gpsimd_engine_active_time:f32 gpsimd_engine_active_time_percent:f32 "
        "gpsimd_engine_instruction_count:i64 cc_op_time:f32 cc_op_active_time:f32 "
        "cc_op_active_time_percent:f32 cc_op_count:i64 cc_cores_instruction_time:f32 "
        "cc_cores_instruction_active_time:f32 cc_cores_instruction_active_time_percent:f32 "
        "cc_cores_instruction_count:i64 total_exec_time:f32 total_active_time:f32 "
        "total_active_time_percent:f32"
    ),
    "SystemProfileEvents": (
        "id:i64! name:str! start_ts:i64@ns! end_ts:i64@ns! duration_ns:i64@ns! trace_event_source:str! "
        "instance_id:str! process_id:i64! thread_id:i64! nc_idx:i64 pcore_idx:i64 worker_gid:i64 "
        "flow_id:[str] framework_stream_id:str extra_attributes_json:str"
    ),
    "SystemProfileHbmUsage": (
        "timestamp:i64@ns! total_bytes:i64! generic_bytes:i64! tensor_instructions_bytes:i64! "
        "scalar_instructions_bytes:i64! gpsimd_instructions_bytes:i64! io_bytes:i64! "
        "dram_spill_bytes:i64! weights_bytes:i64! profiler_buffers_bytes:i64! scalar_table_bytes:i64! "
        "vector_instructions_bytes:i64! sync_instructions_bytes:i64! shared_scratchpad_bytes:i64! "
        "tensors_bytes:i64! ucode_lib_bytes:i64! gpsimd_stdio_bytes:i64! collectives_bytes:i64! "
        "scratchpad_bytes:i64! dma_rings_runtime_bytes:i64! dma_rings_spill_bytes:i64! "
        "dma_rings_io_bytes:i64! dma_rings_collectives_bytes:i64! unknown_bytes:i64! device_idx:i64! "
        "hbm_idx:i64! instance_id:str!"
    ),
    "SystemProfileMetadata": (
        "first_ts:str! last_ts:str! first_ts_ns:str! last_ts_ns:str! ntff_version:i64! "
        "hbm_capacity_bytes:i64!"
    ),
    "TensorInfo": (
        "variable_name:str type:str format:str shape:str size:i64 node:i64 pcore_idx:i64 "
        "load_to_sbuf_avg_size_bytes:i64 load_to_sbuf_total_size_bytes:i64 load_to_sbuf_dma_count:i64 "
        "load_to_sbuf_repeat_factor:f32"
    ),
    "Throttle": "duration:i64@ns! k:i32! n:i32! timestamp:i64@ns! type:str! pcore_idx:i64",
    "ThrottleSummary": (
        "nc_idx:i32! throttle_type:str throttle_active_time_ns:i64@ns throttle_active_time_percent:f32 "
        "max_achievable_util_with_throttling_percent:f32"
    ),
    "Warning": "message:str! category:str!",
}

_ARROW: dict[str, pa.DataType] = {
    "i64": pa.int64(), "i32": pa.int32(), "f32": pa.float64(), "f64": pa.float64(), "str": pa.string(),
    "bool": pa.bool_(), "[i64]": pa.list_(pa.int64()), "[str]": pa.list_(pa.string()),
}


@dataclass(frozen=True)
class FieldSpec:
    """One published field: its name, type code (see _FIELDS), whether required, whether a time in ns."""

    name: str
    type: str
    required: bool
    ns: bool

    @property
    def arrow_type(self) -> pa.DataType:
        return _ARROW[self.type]


def _parse_field(token: str) -> FieldSpec:
    name, _, rest = token.partition(":")
    required = rest.endswith("!")
    rest = rest.removesuffix("!")
    kind, _, unit = rest.partition("@")
    return FieldSpec(name, kind, required, unit == "ns")


@cache
def fields_of(table: str) -> tuple[FieldSpec, ...]:
    """A published table's fields (empty for a table the schema does not know)."""
    return tuple(_parse_field(tok) for tok in _FIELDS.get(table, "").split())


def table_names() -> tuple[str, ...]:
    return tuple(_FIELDS)


def arrow_schema(table: str) -> pa.Schema:
    """The published columns of a table with their Arrow types: how an absent table is stored (empty)."""
    return pa.schema([(f.name, f.arrow_type) for f in fields_of(table)])


def time_fields(table: str) -> tuple[str, ...]:
    return tuple(f.name for f in fields_of(table) if f.ns)


@dataclass(frozen=True)
class Recognizer:
    """A table recognised by its columns: all of `required` and, when given, one of `any_of`."""

    table: str
    required: tuple[str, ...]
    version: str = SCHEMA_VERSION
    any_of: tuple[str, ...] = ()

    def matches(self, columns: set[str]) -> bool:
        return all(c in columns for c in self.required) and (not self.any_of or bool(columns & set(self.any_of)))


# Recognition by columns, tried in order (the more specific first); file stems are tried before this.
# HbmUsage and DmaUsage share their columns: without the stem such a file reads as HbmUsage.
RECOGNIZERS: tuple[Recognizer, ...] = (
    Recognizer("SystemProfileEvents", ("name", "start_ts", "trace_event_source")),
    Recognizer("SystemProfileHbmUsage", ("timestamp", "total_bytes", "hbm_idx")),
    Recognizer("CpuUsage", ("timestamp", "util_percent", "cpu_id")),
    Recognizer("HostMemUsage", ("timestamp", "used_bytes")),
    Recognizer("DeviceProfileList", ("device_profile_name", "nc_id", "process_id")),
    Recognizer("SchemaFields", ("table_name", "field_name", "field_type")),
    Recognizer("Metadata", ("profile_schema_version",)),
    Recognizer("Instruction", ("start_ts", "end_ts", "engine", "opcode", "operands")),
    Recognizer("DmaPacketAggregated", ("start_ts", "end_ts", "queue_name", "block_id", "source", "dest")),
    Recognizer("DmaPacket", ("start_ts", "end_ts", "packet_idx", "transfer_bytes", "queue_type")),
    Recognizer("ActiveTime", ("start_ts", "end_ts", "engine", "duration_ns")),
    Recognizer("CcOp", ("start_ts", "end_ts", "operation", "algorithm", "op_id")),
    Recognizer("CcInstruction", ("start_ts", "end_ts", "core_idx", "description")),
    Recognizer("FrameworkNode", ("node_name", "children_names", "parent_name")),
    Recognizer("FrameworkInstruction", ("raw_framework_id", "start_ts", "time_intervals", "framework_name")),
    Recognizer("HloInstruction", ("raw_hlo_id", "start_ts", "time_intervals", "hlo_name")),
    Recognizer("SbufAllocation", ("start_ts", "end_ts", "start_address", "end_address", "partition")),
    Recognizer("OpcodeSummary", ("engine", "opcode", "instruction_count", "instruction_time_ns")),
    Recognizer("Throttle", ("timestamp", "duration", "k", "n")),
    Recognizer("SemaphoreUpdate", ("timestamp", "id", "value", "update_source")),
    Recognizer("PendingDma", ("timestamp", "value")),
    Recognizer("HbmUsage", ("timestamp", "current_throughput", "total_transfer_bytes")),
    Recognizer("SbufUsage", ("timestamp",), any_of=("partition_0_util_percent", "partition_32_util_percent")),
    Recognizer("PsumUsage", ("timestamp",), any_of=("bank_0_util_percent", "bank_1_util_percent")),
    Recognizer("Error", ("timestamp", "error_type_id", "description")),
    Recognizer("Flow", ("in_id", "out_id", "in_table", "out_table")),
    Recognizer("ExecutionInfo", ("execution_index",), any_of=("execution_start_ts", "neff_name")),
    Recognizer("NeffHeader", ("network_name",), any_of=("neuroncore_count", "pcore_count_per_lnc")),
    Recognizer("TensorInfo", ("variable_name",), any_of=("load_to_sbuf_repeat_factor", "load_to_sbuf_dma_count")),
    Recognizer("Summary", ("total_time",), any_of=("hardware_flops", "mfu_estimated_percent")),
    Recognizer("Warning", ("message", "category")),
    # older spellings, kept as fallbacks
    Recognizer("SystemProfileHbmUsage", (), LEGACY, ("hbm_usage_bytes", "hbm_bytes", "hbm_category", "hbm_idx")),
    Recognizer("CpuUsage", (), LEGACY, ("cpu_util", "cpu_utilization", "util", "cpu_id")),
    Recognizer("HostMemUsage", (), LEGACY, ("host_mem_bytes", "host_memory_bytes", "percent_usage", "usage")),
    Recognizer("Warning", (), LEGACY, ("warning", "message")),
)

_SPLIT = re.compile(r"^(?P<table>.+?)_(?P<part>\d+)$")
_BY_LOWER = {name.lower(): name for name in _FIELDS}


def table_of_stem(stem: str) -> tuple[str, int]:
    """(table, part) a file stem names: `Instruction` -> ("Instruction", 0), `Instruction_3` -> (.., 3);
    ("", 0) when the stem is no published table. Case is ignored (some outputs capitalise differently)."""
    if stem.lower() in _BY_LOWER:
        return _BY_LOWER[stem.lower()], 0
    m = _SPLIT.match(stem)
    if m and m.group("table").lower() in _BY_LOWER:
        return _BY_LOWER[m.group("table").lower()], int(m.group("part"))
    return "", 0


def recognize_columns(columns: list[str]) -> Recognizer | None:
    names = set(columns)
    return next((r for r in RECOGNIZERS if r.matches(names)), None)


def has_required_columns(table: str, columns: list[str]) -> bool:
    """Whether a file named like `table` has the columns that recognise it (its recognition row)."""
    rows = [r for r in RECOGNIZERS if r.table == table]
    names = set(columns)
    return not rows or any(r.matches(names) for r in rows)


def major_version(version: str) -> int | None:
    head = version.strip().lstrip("vV").split(".", 1)[0]
    return int(head) if head.isdigit() else None


def with_published_columns(name: str, table: pa.Table) -> pa.Table:
    """`table` plus, as nulls, every published column it lacks; one null array per type is shared."""
    nulls: dict[pa.DataType, pa.Array] = {}
    for spec in fields_of(name):
        if spec.name not in table.column_names:
            column = nulls.setdefault(spec.arrow_type, pa.nulls(table.num_rows, spec.arrow_type))
            table = table.append_column(spec.name, column)
    return table
