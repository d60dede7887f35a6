// Asio and Beast are header-only; compiling their implementation once here
// (with *_SEPARATE_COMPILATION defined project-wide) keeps every other
// translation unit from re-instantiating it, which matters on a 2-core box.
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
