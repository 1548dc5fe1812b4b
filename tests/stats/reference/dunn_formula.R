# Dunn's (1964) test with tie correction, written from the formula -- an implementation
# independent of rstatix::dunn_test (which make_reference.R also calls) so the two can be
# cross-checked. Neither r-cran-dunn.test nor r-cran-pmcmrplus is packaged in Debian bookworm.
#
# Dunn, O. J. (1964). Multiple comparisons using rank sums. Technometrics 6(3), 241-252.
# With N observations ranked together (mid-ranks for ties), mean ranks R_i of groups of size n_i
# and tie groups of sizes t_s:
#   z_ij = (R_j - R_i) / sqrt( (N (N + 1) / 12 - sum(t_s^3 - t_s) / (12 (N - 1))) (1/n_i + 1/n_j) )
#   p_ij = 2 P(Z > |z_ij|)                      (two-sided)
# (tie term: Glantz 2012, Primer of Biostatistics; also FSA::dunnTest, dunn.test::dunn.test).
#
# Groups are compared in the order of levels(g): for i < j, group1 = level i, group2 = level j,
# estimate = R_j - R_i (the "group2 - group1" convention of TukeyHSD).

dunn_formula <- function(y, g, p.adjust.method = "holm") {
  g <- factor(g)
  n_total <- length(y)
  r <- rank(y)                       # mid-ranks for ties
  mean_rank <- tapply(r, g, mean)
  n <- tapply(r, g, length)
  ties <- table(y)
  tie_term <- sum(ties^3 - ties) / (12 * (n_total - 1))
  lev <- levels(g)
  rows <- list()
  for (i in seq_along(lev)) for (j in seq_along(lev)) if (i < j) {
    est <- mean_rank[[j]] - mean_rank[[i]]
    se <- sqrt((n_total * (n_total + 1) / 12 - tie_term) * (1 / n[[i]] + 1 / n[[j]]))
    z <- est / se
    rows[[length(rows) + 1]] <- data.frame(group1 = lev[i], group2 = lev[j], estimate = est,
                                           statistic = z, p = 2 * pnorm(-abs(z)))
  }
  out <- do.call(rbind, rows)
  out$p_adj <- p.adjust(out$p, method = p.adjust.method)
  out
}
