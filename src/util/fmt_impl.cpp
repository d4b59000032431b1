// fmt's compiled part, built into rlock instead of linking libfmt.so (which
// would bring libstdc++.so back into a binary that links libstdc++
// statically: see RLOCK_STATIC_RUNTIME in CMakeLists.txt). What fmt's own
// src/format.cc holds, for fmt 9 (Debian 12): the implementation header,
// included once here rather than in every file (FMT_HEADER_ONLY would
// compile it ~30 times, +2 CPU seconds each), and the explicit
// instantiations the other files' `extern template`s refer to.
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {

template FMT_API auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template FMT_API auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;

#ifndef FMT_STATIC_THOUSANDS_SEPARATOR
template FMT_API locale_ref::locale_ref(const std::locale& loc);
template FMT_API auto locale_ref::get<std::locale>() const -> std::locale;
#endif

template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;
template FMT_API void buffer<char>::append(const char*, const char*);
template FMT_API void vformat_to(buffer<char>&, string_view,
                                 basic_format_args<FMT_BUFFER_CONTEXT(char)>, locale_ref);

}  // namespace detail
FMT_END_NAMESPACE
