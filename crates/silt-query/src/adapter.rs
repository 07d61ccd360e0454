//! Reading files whose schema differs from their table's unified schema.
//!
//! A table's files may disagree (a column added, an integer widened, a struct that gained a
//! field, an EVE field that was a scalar and became a list); the table schema is their
//! unification by [`silt_core::schema::unify_schemas`] and every file is adapted to it with the
//! same rules ([`silt_core::schema::conform_array`]), so a query sees one shape.
//!
//! - Parquet: DataFusion's [`DefaultPhysicalExprAdapter`] rewrites expressions per file (missing
//!   columns and struct fields become nulls, types are cast) while keeping row-group, page-index
//!   and bloom-filter pruning working. It cannot do silt's rules 5 and 6 (a scalar read as a
//!   one-element list; a struct or list rendered as JSON text): [`SiltExprAdapterFactory`] lets
//!   the default adapter see such columns with their physical type and then wraps them in a
//!   [`ConformExpr`], which calls silt-core. Predicates on such columns are not used for
//!   pruning in those files (the expression is opaque to the pruner), which is always safe.
//! - Feather (Arrow IPC): DataFusion's Arrow source does no schema adaptation at all, so the
//!   table provider scans each group of identically-shaped files with its own physical schema
//!   and puts a [`ConformExec`] on top that conforms every batch with silt-core.
//!
//! Touches nothing outside the plans and expressions it builds.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use arrow::datatypes::{DataType, FieldRef, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::ColumnarValue;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_expr_adapter::{
    DefaultPhysicalExprAdapter, PhysicalExprAdapter, PhysicalExprAdapterFactory,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, PlanProperties,
};
use futures::StreamExt;

/// True when turning physical type `p` into logical type `l` needs silt's own rules (5: scalar
/// to list, 6: nested to JSON text) somewhere inside, which a DataFusion cast cannot do.
pub fn needs_silt_conform(p: &DataType, l: &DataType) -> bool {
    use DataType::*;
    if p == l {
        return false;
    }
    match (p, l) {
        (Struct(pf), Struct(lf)) => pf.iter().any(|f| {
            lf.iter()
                .find(|g| g.name() == f.name())
                .is_some_and(|g| needs_silt_conform(f.data_type(), g.data_type()))
        }),
        (List(pe) | LargeList(pe), List(le) | LargeList(le)) => {
            needs_silt_conform(pe.data_type(), le.data_type())
        }
        // Rule 5 wraps scalars and structs alike (`silt_core::schema`): a file whose `dns` was
        // one object read under a table where other files have a list of objects. Leaving
        // structs out here handed the pair to DataFusion's cast, which fails the whole query
        // ("Cannot cast struct field ... to List").
        (p, List(_) | LargeList(_)) if !p.is_nested() || matches!(p, Struct(_)) => true,
        (p, Utf8 | LargeUtf8) if p.is_nested() => true,
        _ => false,
    }
}

/// True when a predicate on a column of physical type `p`, adapted to logical type `l`, can
/// still be evaluated inside the Parquet decoder ("filter pushdown"). DataFusion decides
/// pushdown once against the table schema and, for a file where the adapted predicate turns out
/// not to be evaluable there (it reads a whole struct, e.g. through [`ConformExpr`]), silently
/// skips it; so pushdown is only switched on for tables whose files all pass this test:
/// identical types, primitive casts, and structs whose common fields pass recursively.
pub fn pushdown_safe(p: &DataType, l: &DataType) -> bool {
    use DataType::*;
    if p == l {
        return true;
    }
    match (p, l) {
        (Struct(pf), Struct(lf)) => pf.iter().all(|f| {
            lf.iter()
                .find(|g| g.name() == f.name())
                .is_none_or(|g| pushdown_safe(f.data_type(), g.data_type()))
        }),
        (p, l) => !p.is_nested() && !l.is_nested(),
    }
}

/// Creates [`SiltExprAdapter`]s: DataFusion's default adaptation plus silt's rules 5 and 6.
#[derive(Debug, Default)]
pub struct SiltExprAdapterFactory;

impl PhysicalExprAdapterFactory for SiltExprAdapterFactory {
    fn create(
        &self,
        logical_file_schema: SchemaRef,
        physical_file_schema: SchemaRef,
    ) -> Result<Arc<dyn PhysicalExprAdapter>> {
        let mut special = Vec::new();
        let mut fields: Vec<FieldRef> = logical_file_schema.fields().iter().cloned().collect();
        for f in fields.iter_mut() {
            if let Ok(p) = physical_file_schema.field_with_name(f.name()) {
                if needs_silt_conform(p.data_type(), f.data_type()) {
                    special.push(f.clone());
                    // The default adapter must leave this column alone: show it the physical field.
                    *f = Arc::new(p.clone());
                }
            }
        }
        let patched = Arc::new(Schema::new_with_metadata(
            fields,
            logical_file_schema.metadata().clone(),
        ));
        Ok(Arc::new(SiltExprAdapter {
            inner: DefaultPhysicalExprAdapter::new(patched, physical_file_schema),
            special,
        }))
    }
}

/// See [`SiltExprAdapterFactory`].
#[derive(Debug)]
pub struct SiltExprAdapter {
    inner: DefaultPhysicalExprAdapter,
    /// Logical fields of the columns that need [`ConformExpr`].
    special: Vec<FieldRef>,
}

impl PhysicalExprAdapter for SiltExprAdapter {
    fn rewrite(&self, expr: Arc<dyn PhysicalExpr>) -> Result<Arc<dyn PhysicalExpr>> {
        let expr = self.inner.rewrite(expr)?;
        if self.special.is_empty() {
            return Ok(expr);
        }
        expr.transform_down(|e| {
            if let Some(c) = e.downcast_ref::<Column>() {
                if let Some(f) = self.special.iter().find(|f| f.name() == c.name()) {
                    let wrapped: Arc<dyn PhysicalExpr> =
                        Arc::new(ConformExpr::new(e.clone(), f.clone()));
                    return Ok(Transformed::new(wrapped, true, TreeNodeRecursion::Jump));
                }
            }
            if e.is::<ConformExpr>() {
                return Ok(Transformed::new(e, false, TreeNodeRecursion::Jump));
            }
            Ok(Transformed::no(e))
        })
        .data()
    }
}

/// Evaluates its child and reshapes the result to `target` by silt's unification rules.
#[derive(Debug, Clone)]
pub struct ConformExpr {
    child: Arc<dyn PhysicalExpr>,
    target: FieldRef,
}

impl ConformExpr {
    pub fn new(child: Arc<dyn PhysicalExpr>, target: FieldRef) -> Self {
        Self { child, target }
    }
}

impl PartialEq for ConformExpr {
    fn eq(&self, o: &Self) -> bool {
        self.child.as_ref() == o.child.as_ref() && self.target == o.target
    }
}

impl Eq for ConformExpr {}

impl Hash for ConformExpr {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.child.hash(state);
        self.target.hash(state);
    }
}

impl fmt::Display for ConformExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "silt_conform({}, {})",
            self.child,
            self.target.data_type()
        )
    }
}

impl PhysicalExpr for ConformExpr {
    fn return_field(&self, _input_schema: &Schema) -> Result<FieldRef> {
        Ok(self.target.clone())
    }

    fn evaluate(&self, batch: &RecordBatch) -> Result<ColumnarValue> {
        let a = self.child.evaluate(batch)?.into_array(batch.num_rows())?;
        let out = silt_core::schema::conform_array(&a, self.target.data_type())?;
        Ok(ColumnarValue::Array(out))
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        vec![&self.child]
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn PhysicalExpr>>,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        if children.len() != 1 {
            return Err(DataFusionError::Internal(
                "silt_conform takes one child".into(),
            ));
        }
        Ok(Arc::new(Self::new(children.remove(0), self.target.clone())))
    }

    fn fmt_sql(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "silt_conform(")?;
        self.child.fmt_sql(f)?;
        write!(f, ")")
    }
}

/// Conforms every batch of its input to `schema` with [`silt_core::schema::conform`] (by
/// column name: missing columns become nulls, types widen by the unification rules).
#[derive(Debug)]
pub struct ConformExec {
    input: Arc<dyn ExecutionPlan>,
    schema: SchemaRef,
    props: Arc<PlanProperties>,
}

impl ConformExec {
    pub fn new(input: Arc<dyn ExecutionPlan>, schema: SchemaRef) -> Self {
        let props = PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            input.output_partitioning().clone(),
            input.pipeline_behavior(),
            input.boundedness(),
        );
        Self {
            input,
            schema,
            props: Arc::new(props),
        }
    }
}

impl DisplayAs for ConformExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "SiltConformExec: {} columns", self.schema.fields().len())
    }
}

impl ExecutionPlan for ConformExec {
    fn name(&self) -> &str {
        "SiltConformExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.props
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.len() != 1 {
            return Err(DataFusionError::Internal(
                "SiltConformExec takes one child".into(),
            ));
        }
        Ok(Arc::new(Self::new(children.remove(0), self.schema.clone())))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let schema = self.schema.clone();
        let input = self.input.execute(partition, context)?;
        let s2 = schema.clone();
        let stream = input.map(move |b| {
            let b = b?;
            Ok(silt_core::schema::conform(&b, &s2)?)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::Field;

    #[test]
    fn pushdown_safety() {
        use DataType::*;
        let l = List(Arc::new(Field::new("item", Int64, true)));
        assert!(pushdown_safe(&Int32, &Int64));
        assert!(!pushdown_safe(&Int64, &l));
        let s = Struct(vec![Field::new("a", Int32, true)].into());
        let s2 = Struct(vec![Field::new("a", Int64, true), Field::new("b", Utf8, true)].into());
        assert!(pushdown_safe(&s, &s2));
        assert!(!pushdown_safe(&s, &Utf8));
    }

    #[test]
    fn detects_rules_5_and_6() {
        use DataType::*;
        let l = List(Arc::new(Field::new("item", Int64, true)));
        assert!(needs_silt_conform(&Int64, &l));
        assert!(!needs_silt_conform(&Int32, &Int64));
        let s = Struct(vec![Field::new("a", Int64, true)].into());
        assert!(needs_silt_conform(&s, &Utf8));
        let s2 = Struct(vec![Field::new("a", l.clone(), true)].into());
        assert!(needs_silt_conform(&s, &s2));
        let s3 = Struct(vec![Field::new("a", Int64, true), Field::new("b", Utf8, true)].into());
        assert!(!needs_silt_conform(&s, &s3));
        // Rule 5 for structs: one object where the table has a list of objects, also nested.
        let ls = List(Arc::new(Field::new("item", s.clone(), true)));
        assert!(needs_silt_conform(&s, &ls));
        let lt = List(Arc::new(Field::new("item", Utf8, true)));
        assert!(needs_silt_conform(&s, &lt));
        let outer = |t: DataType| Struct(vec![Field::new("x", t, true)].into());
        assert!(needs_silt_conform(&outer(s.clone()), &outer(ls)));
    }
}
