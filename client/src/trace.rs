//! The W3C trace context an ask carries to the server, whose span of the human's wait
//! then joins the caller's trace.

use tonic::metadata::{Ascii, MetadataMap, MetadataValue};

/// The headers of a W3C trace context: all an ask carries of the caller's context
/// (never its baggage, whatever the application's propagator writes).
#[cfg(feature = "opentelemetry")]
const TRACE_HEADERS: [&str; 2] = ["traceparent", "tracestate"];

/// Puts the ask's trace context into a call's metadata: the one it was given
/// ([`crate::Ask::trace_context`]), else, with the `opentelemetry` feature, the current
/// OpenTelemetry context's trace context as the global propagator writes it.
pub(crate) fn carry(given: &[(&'static str, MetadataValue<Ascii>)], metadata: &mut MetadataMap) {
    if given.is_empty() {
        #[cfg(feature = "opentelemetry")]
        current(metadata);
        return;
    }
    for (name, value) in given {
        metadata.insert(*name, value.clone());
    }
}

#[cfg(feature = "opentelemetry")]
fn current(metadata: &mut MetadataMap) {
    use tonic::metadata::MetadataKey;

    struct Injector<'a>(&'a mut MetadataMap);
    impl opentelemetry::propagation::Injector for Injector<'_> {
        fn set(&mut self, key: &str, value: String) {
            if !TRACE_HEADERS.contains(&key) {
                return;
            }
            if let (Ok(key), Ok(value)) = (
                MetadataKey::from_bytes(key.as_bytes()),
                MetadataValue::try_from(value),
            ) {
                self.0.insert(key, value);
            }
        }
    }
    let cx = opentelemetry::Context::current();
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.inject_context(&cx, &mut Injector(metadata));
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Ask;

    #[test]
    fn the_given_context_is_carried_and_a_bad_value_is_left_out() {
        let ask = Ask::new("s").trace_context(
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "vendor=a\nb",
        );
        let mut metadata = MetadataMap::new();
        carry(&ask.trace, &mut metadata);
        assert_eq!(
            metadata
                .get("traceparent")
                .map(|v| v.to_str().expect("ascii")),
            Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
        );
        assert!(
            metadata.get("tracestate").is_none(),
            "not a header value: left out"
        );
    }

    #[cfg(feature = "opentelemetry")]
    #[test]
    fn the_current_context_is_carried_without_its_baggage() {
        use opentelemetry::{
            KeyValue,
            baggage::BaggageExt,
            propagation::TextMapCompositePropagator,
            trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState},
        };
        use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};

        // The application's propagator writes baggage too.
        opentelemetry::global::set_text_map_propagator(TextMapCompositePropagator::new(vec![
            Box::new(TraceContextPropagator::new()),
            Box::new(BaggagePropagator::new()),
        ]));
        let span = SpanContext::new(
            TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").expect("hex"),
            SpanId::from_hex("b7ad6b7169203331").expect("hex"),
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        );
        let cx = opentelemetry::Context::current()
            .with_remote_span_context(span)
            .with_baggage([KeyValue::new("user.email", "someone@example.com")]);
        let _current = cx.attach();
        let mut metadata = MetadataMap::new();
        carry(&Ask::new("s").trace, &mut metadata);
        assert_eq!(
            metadata
                .get("traceparent")
                .map(|v| v.to_str().expect("ascii")),
            Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
        );
        assert!(metadata.get("baggage").is_none(), "{metadata:?}");
    }
}
