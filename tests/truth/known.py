"""Known misreadings of the product, measured by bench/truth.py: (case id, check) -> the discrepancy
(reader vs product). Each is a strict xfail in test_truth.py: delete the entry when the product is fixed."""

KNOWN: dict[tuple[str, str], str] = {
    ('corpus/AMD-AGI+TraceLens/tests/traces/b200/eager_trace.json.gz', 'device_busy'):
        "issue 34 #4: one device's busy time split over several 'devices' (kernels overlap on one stream); measured (reader vs product): [11596482] vs [2042173, 9623587]",
    ('corpus/AMD-AGI+TraceLens/tests/traces/b200/eager_trace.json.gz', 'ops_attributed'):
        'issue 34 #1: the DEVICE TIME card counts device time no cpu_op launched as attributed; measured (reader vs product): 11660672 vs 11665760',
    ('corpus/AMD-AGI+TraceLens/tests/traces/b200/eager_trace.json.gz', 'ops_by_op'):
        'issue 34 #1: device time given to a record_function annotation or Python frame, not the nearest enclosing cpu_op; measured (reader vs product): 5 differ; nccl:_all_gather_base: None vs 21953; record_param_comms: 21953 vs None; triton_poi_fused_add_bitwise_and_bitwise_not_bitwise_or_ge_l: 1984 vs None',
    ('corpus/AMD-AGI+TraceLens/tests/traces/b200/eager_trace.json.gz', 'ops_view_total'):
        "issue 34 #1: the default op view's device total differs from the cpu_op-attributed device time; measured (reader vs product): 11660672 vs 5094441",
    ('corpus/AMD-AGI+TraceLens/tests/traces/h100/Falconsai_nsfw_image_detection__1016002.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1752825292661417544, 1752825292669561959) vs (1752825292661368399, 1752825292672778466)",
    ('corpus/AMD-AGI+TraceLens/tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1752839461731516983, 1752839461781296515) vs (1752839461731456483, 1752839461795541498)",
    ('corpus/AMD-AGI+TraceLens/tests/traces/h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1752831015484834730, 1752831015867807373) vs (1752831015484778337, 1752831015912439015)",
    ('corpus/AMD-AGI+TraceLens/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1752830083332596028, 1752830083337467316) vs (1752830083332500684, 1752830083340892366)",
    ('corpus/AMD-AGI+TraceLens/tests/traces/h100/google_owlv2-large-patch14-ensemble__1016001.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1752829952104654576, 1752829953316288061) vs (1752829952104507840, 1752829953399297385)",
    ('corpus/AMD-AGI+TraceLens/tests/traces/inference/sglang_decode/capture_traces/bs_32_rank0.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1779988283314686437, 1779988283348873445) vs (1779988283314358856, 1779988283372604521)",
    ('corpus/AMD-AGI+TraceLens/tests/traces/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz', 'device_busy'):
        "issue 34 #4: one device's busy time split over several 'devices' (kernels overlap on one stream); measured (reader vs product): [9772926] vs [9934, 9768680]",
    ('corpus/AMD-AGI+TraceLens/tests/traces/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz', 'ops_attributed'):
        'issue 34 #1: the DEVICE TIME card counts device time no cpu_op launched as attributed; measured (reader vs product): 104627 vs 9778614',
    ('corpus/AMD-AGI+TraceLens/tests/traces/inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz', 'device_busy'):
        "issue 34 #4: one device's busy time split over several 'devices' (kernels overlap on one stream); measured (reader vs product): [492806877] vs [8171, 492803392]",
    ('corpus/AMD-AGI+TraceLens/tests/traces/inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz', 'ops_attributed'):
        'issue 34 #1: the DEVICE TIME card counts device time no cpu_op launched as attributed; measured (reader vs product): 492799867 vs 492811563',
    ('corpus/AMD-AGI+TraceLens/tests/traces/inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz', 'ops_by_op'):
        'issue 34 #1: device time given to a record_function annotation or Python frame, not the nearest enclosing cpu_op; measured (reader vs product): 5 differ; aiter::add_rmsnorm: 8699121 vs None; aiter::mha_batch_prefill: 20075158 vs None; aiter::rmsnorm: 17559439 vs None',
    ('corpus/AMD-AGI+TraceLens/tests/traces/inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz', 'ops_view_total'):
        "issue 34 #1: the default op view's device total differs from the cpu_op-attributed device time; measured (reader vs product): 492799867 vs 445189201",
    ('corpus/AMD-AGI+TraceLens/tests/traces/inference/vllm_decode_full/capture_traces/graph_capture_rank_0.1773709742341309550.pt.trace.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1773709742063661945, 1773709742122780651) vs (1773709742063606411, 1773709742182476089)",
    ('corpus/AMD-AGI+TraceLens/tests/traces/inference/vllm_prefilldecode_piecewise/capture_traces/graph_capture_rank_0.1773709679453551615.pt.trace.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1773709679067328811, 1773709679241654614) vs (1773709679067263070, 1773709679297004727)",
    ('corpus/AMD-AGI+TraceLens/tests/traces/inference/xdit_flux.1/capture_traces/capture_trace_rank_0.json.gz', 'ops_by_op'):
        'issue 34 #1: device time given to a record_function annotation or Python frame, not the nearest enclosing cpu_op; measured (reader vs product): 2 differ; Torch-Compiled Region: 0/0: 35504808 vs 35501324; aiter::_groupnorm_run: 550757 vs None',
    ('corpus/AMD-AGI+TraceLens/tests/traces/inference/xdit_flux.1/capture_traces/capture_trace_rank_0.json.gz', 'ops_view_total'):
        "issue 34 #1: the default op view's device total differs from the cpu_op-attributed device time; measured (reader vs product): 64139539 vs 63585298",
    ('corpus/AMD-AGI+TraceLens/tests/traces/inference/xdit_flux.1/capture_traces/capture_trace_rank_0.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1786488101156560070, 1786488101579218569) vs (1786488101156464983, 1786488101717791760)",
    ('corpus/AMD-AGI+TraceLens/tests/traces/inference/xdit_flux.1_aiter_sage/capture_traces/capture_trace_rank_0.json.gz', 'ops_by_op'):
        'issue 34 #1: device time given to a record_function annotation or Python frame, not the nearest enclosing cpu_op; measured (reader vs product): 2 differ; Torch-Compiled Region: 0/0: 43222568 vs 43217602; aiter::_groupnorm_run: 545471 vs None',
    ('corpus/AMD-AGI+TraceLens/tests/traces/inference/xdit_flux.1_aiter_sage/capture_traces/capture_trace_rank_0.json.gz', 'ops_view_total'):
        "issue 34 #1: the default op view's device total differs from the cpu_op-attributed device time; measured (reader vs product): 72983539 vs 72433102",
    ('corpus/AMD-AGI+TraceLens/tests/traces/inference/xdit_flux.1_aiter_sage/capture_traces/capture_trace_rank_0.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1786993933552318980, 1786993934291816433) vs (1786993933552243276, 1786993934440765572)",
    ('corpus/AMD-AGI+TraceLens/tests/traces/inference/xdit_flux.1_aiter_sage/profile_trace_rank_0.json.gz', 'ops_by_op'):
        'issue 34 #1: device time given to a record_function annotation or Python frame, not the nearest enclosing cpu_op; measured (reader vs product): 2 differ; Torch-Compiled Region: 0/0: 170998308 vs 170980927; aiter::_groupnorm_run: 662370 vs None',
    ('corpus/AMD-AGI+TraceLens/tests/traces/inference/xdit_flux.1_aiter_sage/profile_trace_rank_0.json.gz', 'ops_view_total'):
        "issue 34 #1: the default op view's device total differs from the cpu_op-attributed device time; measured (reader vs product): 201351762 vs 200672011",
    ('corpus/AMD-AGI+TraceLens/tests/traces/inference/xdit_flux.1_aiter_sage/profile_trace_rank_0.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1786993938068523414, 1786993938318822540) vs (1786993938068462228, 1786993938480989488)",
    ('corpus/AMD-AGI+TraceLens/tests/traces/inference/xdit_sd_3.5/profile_trace_rank_0.json.gz', 'ops_by_op'):
        'issue 34 #1: device time given to a record_function annotation or Python frame, not the nearest enclosing cpu_op; measured (reader vs product): 27 differ; aiter::_groupnorm_run: 3340944 vs None; triton_per_fused__to_copy_add_addmm_mean_mul_pow_rsqrt_trans: 6847722 vs None; triton_per_fused__to_copy_add_addmm_mean_mul_pow_rsqrt_trans: 1591176 vs None',
    ('corpus/AMD-AGI+TraceLens/tests/traces/inference/xdit_sd_3.5/profile_trace_rank_0.json.gz', 'ops_view_total'):
        "issue 34 #1: the default op view's device total differs from the cpu_op-attributed device time; measured (reader vs product): 712489971 vs 640334720",
    ('corpus/AMD-AGI+TraceLens/tests/traces/inference/xdit_sd_3.5/profile_trace_rank_0.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1785883783397141758, 1785883784592878035) vs (1785883783397050018, 1785883784737853820)",
    ('corpus/AMD-AGI+TraceLens/tests/traces/mi210/gpu_only_trace/gpu_only_trace.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1766169255218001421, 1766169255224026187) vs (1766169255217913045, 1766169255224115277)",
    ('corpus/AMD-AGI+TraceLens/tests/traces/mi300/Falconsai_nsfw_image_detection__1016002.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1753610116222896406, 1753610116230734237) vs (1753610116222845368, 1753610116234580513)",
    ('corpus/AMD-AGI+TraceLens/tests/traces/mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1753652182127076739, 1753652182174271118) vs (1753652182127022523, 1753652182192852157)",
    ('corpus/AMD-AGI+TraceLens/tests/traces/mi300/ddp_resnet18_no_pool/train_resnet18.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1776384066305081353, 1776384069698270910) vs (1776384066305009771, 1776384069706020321)",
    ('corpus/AMD-AGI+TraceLens/tests/traces/mi300/facebook_timesformer-base-finetuned-k400__1016002.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1753645541625994667, 1753645542017415948) vs (1753645541625924302, 1753645542053387960)",
    ('corpus/AMD-AGI+TraceLens/tests/traces/mi300/gaunernst_bert-small-uncased__1016001.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1753615174329503303, 1753615174333924600) vs (1753615174329420671, 1753615174336389168)",
    ('corpus/AMD-AGI+TraceLens/tests/traces/mi300/google_owlv2-large-patch14-ensemble__1016001.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1753622550153023842, 1753622551249884966) vs (1753622550152915534, 1753622551355097330)",
    ('corpus/AMD-AGI+TraceLens/tests/traces/mi300/resnet_act_checkpoint.json.gz', 'ops_by_op'):
        'issue 34 #1: device time given to a record_function annotation or Python frame, not the nearest enclosing cpu_op; measured (reader vs product): 3 differ; nccl:all_reduce: None vs 47137038; nccl:broadcast: None vs 63272; record_param_comms: 47200310 vs None',
    ('corpus/AMD-AGI+TraceLens/tests/traces/mi300/resnet_act_checkpoint.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1770932723222578748, 1770932723309479541) vs (1770932723222487063, 1770932723332364259)",
    ('corpus/AMD-AGI+TraceLens/tests/traces/perf_model/normalization/normalization_layer_test.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1770734368405483876, 1770734369586627602) vs (1770734368405156060, 1770734369594437838)",
    ('corpus/AMD-AGI+TraceLens/tests/traces/torch_compile_triton/trace.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1778681579046213755, 1778681579059153748) vs (1778681579046038437, 1778681579059322061)",
    ('corpus/facebookresearch+param/et_replay/tests/inputs/dlrm_kineto/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json', 'ops_by_op'):
        'issue 34 #1: device time given to a record_function annotation or Python frame, not the nearest enclosing cpu_op; measured (reader vs product): 3 differ; nccl:all_reduce: None vs 10607000; nccl:all_to_all: None vs 37935000; record_param_comms: 48542000 vs None',
    ('corpus/facebookresearch+param/et_replay/tests/inputs/dlrm_kineto/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1694128201421205000, 1694128201442071000) vs (1694128201421058000, 1694128201444219000)",
    ('corpus/facebookresearch+param/et_replay/tests/inputs/linear_kineto.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1689180447559714000, 1689180449563415000) vs (1689180447559362000, 1689180449618265000)",
    ('corpus/facebookresearch+param/et_replay/tests/inputs/resnet_kineto.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1689179597340751000, 1689179613512803000) vs (1689179597340511000, 1689179613551358000)",
    ('fixture/kineto_recursive_frames.json', 'ops_attributed'):
        'issue 34 #1: the DEVICE TIME card counts device time no cpu_op launched as attributed; measured (reader vs product): 179875 vs 230375 (50500 ns launched under Python frames only)',
    ('gloo/2rank', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured on one capture (reader vs product): 1558925302 vs 1559842055 ns",
    ('shared-pair/hta-sampled-rank-0+1', 'ops_attributed'):
        'issue 34 #1: the DEVICE TIME card counts device time no cpu_op launched as attributed; measured (reader vs product): 1274103000 vs 1275374000',
    ('shared-pair/hta-sampled-rank-0+1', 'ops_by_op'):
        'issue 34 #1: device time given to a record_function annotation or Python frame, not the nearest enclosing cpu_op; measured (reader vs product): 6 differ; Optimizer.step#EMAOptimizer.step: None vs 1271000; c10d::_allgather_base_: 211047000 vs None; nccl:_all_gather_base: None vs 211047000',
    ('shared-pair/hta-sampled-rank-0+1', 'ops_view_total'):
        "issue 34 #1: the default op view's device total differs from the cpu_op-attributed device time; measured (reader vs product): 1274103000 vs 1275374000",
    ('shared-pair/hta-sampled-rank-0+1', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1682725898079292000, 1682725899318077000) vs (1682725897226747000, 1682725900594091000)",
    ('shared/HolisticTraceAnalysis/tests/data/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1739836029603187439, 1739836029612770525) vs (1739836029603018756, 1739836029613175703)",
    ('shared/HolisticTraceAnalysis/tests/data/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1721065959529876817, 1721065960812903897) vs (1721065959525586016, 1721065960832503044)",
    ('shared/HolisticTraceAnalysis/tests/data/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1695835542514261000, 1695835585939626000) vs (1695835542481129000, 1695835585940062000)",
    ('shared/HolisticTraceAnalysis/tests/data/critical_path/cuda_event_sync/event_sync_trace.json.gz', 'ops_attributed'):
        'issue 34 #1: the DEVICE TIME card counts device time no cpu_op launched as attributed; measured (reader vs product): 15000 vs 51000',
    ('shared/HolisticTraceAnalysis/tests/data/critical_path/cuda_event_sync/event_sync_trace.json.gz', 'ops_by_op'):
        'issue 34 #1: device time given to a record_function annotation or Python frame, not the nearest enclosing cpu_op; measured (reader vs product): 1 differ; ProfilerStep*: None vs 36000',
    ('shared/HolisticTraceAnalysis/tests/data/critical_path/cuda_event_sync/event_sync_trace.json.gz', 'ops_view_total'):
        "issue 34 #1: the default op view's device total differs from the cpu_op-attributed device time; measured (reader vs product): 15000 vs 51000",
    ('shared/HolisticTraceAnalysis/tests/data/critical_path/cuda_event_sync/event_sync_trace.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1707417525509335000, 1707417525512489000) vs (1707417525509335000, 1707417525512622000)",
    ('shared/HolisticTraceAnalysis/tests/data/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1712867402348256000, 1712867402368186000) vs (1712867402305721000, 1712867402368330000)",
    ('shared/HolisticTraceAnalysis/tests/data/critical_path/end_to_end/simple_add/output/overlaid_critical_path_trace.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1694039968955744000, 1694040010535645000) vs (1694039968933321000, 1694040010536061000)",
    ('shared/HolisticTraceAnalysis/tests/data/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1694039968955744000, 1694040010535645000) vs (1694039968933321000, 1694040010536061000)",
    ('shared/HolisticTraceAnalysis/tests/data/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1679055451546825000, 1679055463395241000) vs (1679055451545746000, 1679055463395290000)",
    ('shared/HolisticTraceAnalysis/tests/data/df_index_resolver/df_index_resolver.json.gz', 'ops_by_op'):
        'issue 34 #1: device time given to a record_function annotation or Python frame, not the nearest enclosing cpu_op; measured (reader vs product): 2 differ; nccl:all_reduce: None vs 357343000; record_param_comms: 357343000 vs None',
    ('shared/HolisticTraceAnalysis/tests/data/df_index_resolver/df_index_resolver.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1669783687384669000, 1669783689122708000) vs (1669783687352244000, 1669783689181563000)",
    ('shared/HolisticTraceAnalysis/tests/data/execution_trace/benchmark_simple_add_trace.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1689360788493697000, 1689360808307984000) vs (1689360788459677000, 1689360808308238000)",
    ('shared/HolisticTraceAnalysis/tests/data/mtia_inference_trace/mtia_inference_rank_0.json.gz', 'ops_attributed'):
        'issue 34 #1: the DEVICE TIME card counts device time no cpu_op launched as attributed; measured (reader vs product): 0 vs 259157591',
    ('shared/HolisticTraceAnalysis/tests/data/mtia_inference_trace/mtia_inference_rank_0.json.gz', 'ops_by_op'):
        'issue 34 #1: device time given to a record_function annotation or Python frame, not the nearest enclosing cpu_op; measured (reader vs product): 2 differ; Stage::updatePredictorExecutorContext: None vs 51193; Stage::waitEvents: None vs 259106398',
    ('shared/HolisticTraceAnalysis/tests/data/mtia_inference_trace/mtia_inference_rank_0.json.gz', 'ops_view_total'):
        "issue 34 #1: the default op view's device total differs from the cpu_op-attributed device time; measured (reader vs product): 0 vs 259157591",
    ('shared/HolisticTraceAnalysis/tests/data/mtia_trace_single_rank/mtia_rank_0.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1731348176881202837, 1731348190221207677) vs (1731348176728338344, 1731348190349996792)",
    ('shared/HolisticTraceAnalysis/tests/data/nccl_parser_config/nccl_data.json.gz', 'ops_by_op'):
        'issue 34 #1: device time given to a record_function annotation or Python frame, not the nearest enclosing cpu_op; measured (reader vs product): 3 differ; nccl:all_reduce: None vs 46762159; nccl:broadcast: None vs 114334; record_param_comms: 46876493 vs None',
    ('shared/HolisticTraceAnalysis/tests/data/nccl_parser_config/nccl_data.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1716423322416788066, 1716423323101161005) vs (1716423322388068751, 1716423323117099727)",
    ('shared/HolisticTraceAnalysis/tests/data/negative_queue_length_values_check/rank0.json.gz', 'ops_attributed'):
        'issue 34 #1: the DEVICE TIME card counts device time no cpu_op launched as attributed; measured (reader vs product): 358195000 vs 390237000',
    ('shared/HolisticTraceAnalysis/tests/data/negative_queue_length_values_check/rank0.json.gz', 'ops_by_op'):
        'issue 34 #1: device time given to a record_function annotation or Python frame, not the nearest enclosing cpu_op; measured (reader vs product): 7 differ; Optimizer.step#FusedAdam.step: None vs 32042000; c10d::_allgather_base_: 4776000 vs None; nccl:_all_gather_base: None vs 4776000',
    ('shared/HolisticTraceAnalysis/tests/data/negative_queue_length_values_check/rank0.json.gz', 'ops_view_total'):
        "issue 34 #1: the default op view's device total differs from the cpu_op-attributed device time; measured (reader vs product): 358195000 vs 390237000",
    ('shared/HolisticTraceAnalysis/tests/data/negative_queue_length_values_check/rank0.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1683564901548726000, 1683564902781195000) vs (1683564901540885000, 1683564902805798000)",
    ('shared/HolisticTraceAnalysis/tests/data/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1712195495502094565, 1712195495997096942) vs (1712195495406752797, 1712195496004644183)",
    ('shared/HolisticTraceAnalysis/tests/data/timeline_analysis/sampled_rank-0.json.gz', 'ops_attributed'):
        'issue 34 #1: the DEVICE TIME card counts device time no cpu_op launched as attributed; measured (reader vs product): 607225000 vs 607844000',
    ('shared/HolisticTraceAnalysis/tests/data/timeline_analysis/sampled_rank-0.json.gz', 'ops_by_op'):
        'issue 34 #1: device time given to a record_function annotation or Python frame, not the nearest enclosing cpu_op; measured (reader vs product): 6 differ; Optimizer.step#EMAOptimizer.step: None vs 619000; c10d::_allgather_base_: 106140000 vs None; nccl:_all_gather_base: None vs 106140000',
    ('shared/HolisticTraceAnalysis/tests/data/timeline_analysis/sampled_rank-0.json.gz', 'ops_view_total'):
        "issue 34 #1: the default op view's device total differs from the cpu_op-attributed device time; measured (reader vs product): 607225000 vs 607844000",
    ('shared/HolisticTraceAnalysis/tests/data/timeline_analysis/sampled_rank-0.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1682725898079292000, 1682725899309581000) vs (1682725897226747000, 1682725900594091000)",
    ('shared/HolisticTraceAnalysis/tests/data/trace_compare/base/base.json.gz', 'device_busy'):
        "issue 34 #4: one device's busy time split over several 'devices' (kernels overlap on one stream); measured (reader vs product): [1694000] vs [478000, 1216000]",
    ('shared/HolisticTraceAnalysis/tests/data/trace_compare/base/base.json.gz', 'ops_attributed'):
        'issue 34 #1: the DEVICE TIME card counts device time no cpu_op launched as attributed; measured (reader vs product): 0 vs 8000',
    ('shared/HolisticTraceAnalysis/tests/data/trace_compare/base/base.json.gz', 'ops_by_op'):
        'issue 34 #1: device time given to a record_function annotation or Python frame, not the nearest enclosing cpu_op; measured (reader vs product): 1 differ; ProfilerStep*: None vs 8000',
    ('shared/HolisticTraceAnalysis/tests/data/trace_compare/base/base.json.gz', 'ops_view_total'):
        "issue 34 #1: the default op view's device total differs from the cpu_op-attributed device time; measured (reader vs product): 0 vs 8000",
    ('shared/HolisticTraceAnalysis/tests/data/trace_compare/test/test.json.gz', 'device_busy'):
        "issue 34 #4: one device's busy time split over several 'devices' (kernels overlap on one stream); measured (reader vs product): [1690000] vs [474000, 1216000]",
    ('shared/HolisticTraceAnalysis/tests/data/trace_compare/test/test.json.gz', 'ops_attributed'):
        'issue 34 #1: the DEVICE TIME card counts device time no cpu_op launched as attributed; measured (reader vs product): 0 vs 4000',
    ('shared/HolisticTraceAnalysis/tests/data/trace_compare/test/test.json.gz', 'ops_by_op'):
        'issue 34 #1: device time given to a record_function annotation or Python frame, not the nearest enclosing cpu_op; measured (reader vs product): 1 differ; ProfilerStep*: None vs 4000',
    ('shared/HolisticTraceAnalysis/tests/data/trace_compare/test/test.json.gz', 'ops_view_total'):
        "issue 34 #1: the default op view's device total differs from the cpu_op-attributed device time; measured (reader vs product): 0 vs 4000",
    ('shared/HolisticTraceAnalysis/tests/data/trace_diff/control/control.json.gz', 'ops_attributed'):
        'issue 34 #1: the DEVICE TIME card counts device time no cpu_op launched as attributed; measured (reader vs product): 493925000 vs 501567000',
    ('shared/HolisticTraceAnalysis/tests/data/trace_diff/control/control.json.gz', 'ops_by_op'):
        'issue 34 #1: device time given to a record_function annotation or Python frame, not the nearest enclosing cpu_op; measured (reader vs product): 4 differ; Optimizer.step#FusedAdam.step: None vs 7642000; nccl:all_reduce: None vs 32880000; nccl:all_to_all: None vs 130655000',
    ('shared/HolisticTraceAnalysis/tests/data/trace_diff/control/control.json.gz', 'ops_view_total'):
        "issue 34 #1: the default op view's device total differs from the cpu_op-attributed device time; measured (reader vs product): 493925000 vs 501567000",
    ('shared/HolisticTraceAnalysis/tests/data/trace_diff/control/control.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1661203462598738000, 1661203463064013000) vs (1661203462584767000, 1661203463125562000)",
    ('shared/HolisticTraceAnalysis/tests/data/trace_diff/test/test.json.gz', 'ops_attributed'):
        'issue 34 #1: the DEVICE TIME card counts device time no cpu_op launched as attributed; measured (reader vs product): 894964000 vs 907245000',
    ('shared/HolisticTraceAnalysis/tests/data/trace_diff/test/test.json.gz', 'ops_by_op'):
        'issue 34 #1: device time given to a record_function annotation or Python frame, not the nearest enclosing cpu_op; measured (reader vs product): 4 differ; Optimizer.step#FusedAdam.step: None vs 12281000; nccl:all_reduce: None vs 80480000; nccl:all_to_all: None vs 148554000',
    ('shared/HolisticTraceAnalysis/tests/data/trace_diff/test/test.json.gz', 'ops_view_total'):
        "issue 34 #1: the default op view's device total differs from the cpu_op-attributed device time; measured (reader vs product): 894964000 vs 907245000",
    ('shared/HolisticTraceAnalysis/tests/data/trace_diff/test/test.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1661938466265032000, 1661938467010373000) vs (1661938466240491000, 1661938467056851000)",
    ('shared/HolisticTraceAnalysis/tests/data/trace_file_list/inference_rank_1.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1665536373729065000, 1665536373730706000) vs (1665536373657908000, 1665536375821491000)",
    ('shared/HolisticTraceAnalysis/tests/data/trace_filter/sampled_rank-1.json.gz', 'ops_attributed'):
        'issue 34 #1: the DEVICE TIME card counts device time no cpu_op launched as attributed; measured (reader vs product): 666878000 vs 667530000',
    ('shared/HolisticTraceAnalysis/tests/data/trace_filter/sampled_rank-1.json.gz', 'ops_by_op'):
        'issue 34 #1: device time given to a record_function annotation or Python frame, not the nearest enclosing cpu_op; measured (reader vs product): 6 differ; Optimizer.step#EMAOptimizer.step: None vs 652000; c10d::_allgather_base_: 104907000 vs None; nccl:_all_gather_base: None vs 104907000',
    ('shared/HolisticTraceAnalysis/tests/data/trace_filter/sampled_rank-1.json.gz', 'ops_view_total'):
        "issue 34 #1: the default op view's device total differs from the cpu_op-attributed device time; measured (reader vs product): 666878000 vs 667530000",
    ('shared/HolisticTraceAnalysis/tests/data/trace_filter/sampled_rank-1.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1682725898079484000, 1682725899318077000) vs (1682725897227300000, 1682725900593698000)",
    ('shared/HolisticTraceAnalysis/tests/data/triton_example/triton_example.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1730156791096090100, 1730156804432405905) vs (1730156790742269099, 1730156804432405905)",
    ('shared/HolisticTraceAnalysis/tests/data/with_gpu_user_annotation/step_based_trace_2543932.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1672876799188721000, 1672876799198711000) vs (1672876799188591000, 1672876799198729000)",
    ('shared/dtu_mlops/trace.json', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1704706862935756000, 1704706863161213000) vs (1704706862934421000, 1704706863165489000)",
    ('shared/kineto/docs/traces/after_fix_trace.json', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1775167061388202765, 1775167061388202895) vs (1775167061388202755, 1775167061388203055)",
    ('shared/kineto/docs/traces/before_fix_trace.json', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1775166987691101729, 1775166987691101859) vs (1775166987691101719, 1775166987691102019)",
    ('shared/kineto/tb_plugin/samples/resnet50_autograd_api_num_workers_0/worker0.pt.trace.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1610366387140599000, 1610366392436019000) vs (1610366387140419000, 1610366392473637000)",
    ('shared/kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1623142623460072000, 1623142624525730000) vs (1623142623460016000, 1623142624633484000)",
    ('shared/kineto/tb_plugin/samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1623212388426851000, 1623212389273546000) vs (1623212388426602000, 1623212389365930000)",
    ('shared/kineto/tb_plugin/test/gpu_metrics_input.json', 'span'):
        "issue 34 #3: the run span runs to Kineto's bookkeeping markers (Record Window End / PyTorch Profiler (0)); measured (reader vs product): (1621401187223182000, 1621401187236863000) vs (1621401187223005000, 1621401187237108000)",
}
